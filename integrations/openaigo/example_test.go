package openaigo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// exampleAPI stands in for the Responses API: it answers every request
// with out.
func exampleAPI(out ...string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([][]byte, len(out))
		for i, o := range out {
			b[i] = []byte(o)
		}
		writeResponse(w, "resp_1", b)
	}))
}

// A conversation's history in SQLite: the user's message, the model's
// answer as the API sent it, and the next request built from the window.
func ExampleHistory() {
	ctx := context.Background()
	srv := exampleAPI(`{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"18°C, clear."}],"role":"assistant"}`)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"))
	dir, _ := os.MkdirTemp("", "history")
	defer os.RemoveAll(dir)

	st, err := adapters.Open(ctx, "sqlite://"+filepath.Join(dir, "agent.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	s, _ := st.Session("conversation-42")
	h := openaigo.New(s, openaigo.Options{Window: 50})

	_ = h.AddJSON(ctx, json.RawMessage(`{"content":"Weather in Paris?","role":"user"}`))
	params, _ := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		panic(err)
	}
	_ = h.AddResponse(ctx, resp)

	items, _ := session.All(ctx, s)
	for _, it := range items {
		fmt.Println(it)
	}
	// Output:
	// {"content":"Weather in Paris?","role":"user"}
	// {"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"18°C, clear."}],"role":"assistant"}
}

// The approval flow: the model calls a tool that needs a human; the
// response parks on the checkpoint (the agent has output guardrails, so
// nothing of it reaches the session yet) and the process exits; a second
// process approves, runs the tool under a claim (RunTool: the claim is
// saved before the tool's side effect, so no other process can run it
// too), settles, and finishes with the model's next answer.
func ExampleInterrupt() {
	ctx := context.Background()
	url, cleanup := exampleParked()
	defer cleanup()
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}

	// Process 2.
	st, _ := adapters.Open(ctx, url)
	defer st.Close()
	s, _ := st.Session("conv-1")
	run, err := runstate.Open(ctx, s, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println("next:", run.Next().Kind, run.Next().CallIDs)
	calls, _ := openaigo.AwaitingCalls(ctx, run, s)
	for _, c := range calls {
		// The human approved: claim, run the tool, record its output.
		err := openaigo.RunTool(ctx, run, c, func(ctx context.Context, call session.Item) (responses.ResponseInputItemUnionParam, error) {
			// The tool's side effect goes here, keyed by call.CallID().
			return openaigo.InputParam(session.MustItem(`{"type":"function_call_output","call_id":"` + call.CallID() + `","output":"deleted"}`)), nil
		})
		if err != nil {
			panic(err) // a conflict: another process claimed the call first
		}
	}
	fmt.Println("next:", run.Next().Kind)
	if err := run.Settle(ctx); err != nil {
		panic(err)
	}
	_ = openaigo.Finish(ctx, run, nil)
	all, _ := session.All(ctx, s)
	for _, it := range all {
		fmt.Println(it)
	}
	// Output:
	// awaiting: [call_1]
	// next: approval [call_1]
	// next: settle
	// {"role":"user","content":"delete my account"}
	// {"arguments":"{}","call_id":"call_1","id":"fc_1","name":"delete_account","status":"completed","type":"function_call"}
	// {"type":"function_call_output","call_id":"call_1","output":"deleted"}
}

// A process that claimed a call dies inside the tool: the next process
// finds the call in doubt, not awaiting (the tool may have acted), asks
// the tool's system under the call id, and records the result it finds
// instead of running the tool again.
func ExampleInDoubtCalls() {
	ctx := context.Background()
	url, cleanup := exampleParked()
	defer cleanup()
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
	deleted := map[string]bool{} // the tool's system, keyed by call id

	// Process 2: claims, the tool acts, the process dies before the output.
	st, _ := adapters.Open(ctx, url)
	s, _ := st.Session("conv-1")
	run, _ := runstate.Open(ctx, s, opts)
	calls, _ := openaigo.AwaitingCalls(ctx, run, s)
	if err := openaigo.Claim(ctx, run, calls[0]); err != nil {
		panic(err)
	}
	deleted[calls[0].CallID()] = true
	_ = st.Close() // killed here

	// Process 3.
	st, _ = adapters.Open(ctx, url)
	defer st.Close()
	s, _ = st.Session("conv-1")
	run, _ = runstate.Open(ctx, s, opts)
	fmt.Println("next:", run.Next().Kind, run.Next().CallIDs, "awaiting:", run.Awaiting())
	doubt, _ := openaigo.InDoubtCalls(ctx, run, s)
	for _, c := range doubt {
		if deleted[c.CallID()] {
			// It acted: record what it did.
			_ = openaigo.Output(ctx, run, openaigo.InputParam(session.MustItem(`{"type":"function_call_output","call_id":"`+c.CallID()+`","output":"deleted"}`)))
		} else {
			// It did not: run it again, on purpose (run.Reclaim, then RunTool).
			_ = run.Reclaim(ctx, c.CallID())
		}
	}
	fmt.Println("next:", run.Next().Kind)
	_ = run.Settle(ctx)
	_ = openaigo.Finish(ctx, run, nil)
	all, _ := session.All(ctx, s)
	fmt.Println(len(all), "items; last:", all[len(all)-1])
	// Output:
	// awaiting: [call_1]
	// next: resolve [call_1] awaiting: []
	// next: settle
	// 3 items; last: {"type":"function_call_output","call_id":"call_1","output":"deleted"}
}

// exampleParked is process 1 of the approval examples: the user's message,
// the model's call of a tool that needs a human, parked on the checkpoint
// of session conv-1 in a new SQLite file. It returns the store's URL.
func exampleParked() (url string, cleanup func()) {
	ctx := context.Background()
	call := `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"delete_account"}`
	srv := exampleAPI(call)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"))
	dir, _ := os.MkdirTemp("", "approval")
	url = "sqlite://" + filepath.Join(dir, "agent.db")
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
	needsHuman := func(call session.Item) bool { name, _ := call.StringField("name"); return name == "delete_account" }

	st, _ := adapters.Open(ctx, url)
	defer st.Close()
	s, _ := st.Session("conv-1")
	run, err := runstate.Open(ctx, s, opts)
	if err != nil {
		panic(err)
	}
	_ = openaigo.RunInput(ctx, run, openaigo.InputParam(session.MustItem(`{"role":"user","content":"delete my account"}`)))
	params, _ := openaigo.New(s, openaigo.Options{}).Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
	resp, _ := client.Responses.New(ctx, params)
	items, _ := openaigo.OutputItems(resp)
	ids := openaigo.NeedsApproval(items, needsHuman)
	_ = openaigo.Interrupt(ctx, run, resp, ids)
	fmt.Println("awaiting:", run.Awaiting())
	return url, func() { _ = os.RemoveAll(dir) }
}
