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

// A conversation kept short by the Responses API's compaction: after each
// saved turn the Run asks the compaction session, which compacts once the
// history holds 4 candidates (the default is 10).
func ExampleNewCompactionSession() {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/responses/compact" { // the user messages, then one compaction item
			var req struct{ Input []json.RawMessage }
			_ = json.NewDecoder(r.Body).Decode(&req)
			var out []json.RawMessage
			for _, raw := range req.Input {
				if it, _ := session.NewItem(raw); it.Role() == "user" {
					out = append(out, raw)
				}
			}
			out = append(out, json.RawMessage(`{"id":"cmp_1","type":"compaction","encrypted_content":"gAAAA..."}`))
			b, _ := json.Marshal(out)
			fmt.Fprintf(w, `{"id":"cmp","object":"response.compaction","created_at":1,"output":%s,"usage":{}}`, b)
			return
		}
		writeResponse(w, "resp_1", [][]byte{[]byte(`{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Noted."}],"role":"assistant"}`)})
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("test"))
	dir, _ := os.MkdirTemp("", "compaction")
	defer os.RemoveAll(dir)
	st, err := adapters.Open(ctx, "sqlite://"+filepath.Join(dir, "agent.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	inner, _ := st.Session("conversation-7")

	s, err := openaigo.NewCompactionSession(inner, &client, openaigo.CompactionOptions{
		Mode:          session.CompactionInput,
		ShouldCompact: func(c openaigo.CompactionContext) bool { return len(c.Candidates) >= 4 },
	})
	if err != nil {
		panic(err)
	}
	run, err := runstate.Open(ctx, s, runstate.Options{})
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 4; i++ {
		_ = openaigo.RunInput(ctx, run, openaigo.InputParam(session.MustItem(fmt.Sprintf(`{"role":"user","content":"fact %d"}`, i))))
		params, _ := openaigo.New(s, openaigo.Options{}).Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			panic(err)
		}
		if err := openaigo.Finish(ctx, run, resp); err != nil {
			panic(err)
		}
		items, _ := session.All(ctx, s)
		fmt.Println("turn", i, "items:", len(items))
	}
	items, _ := session.All(ctx, s)
	for _, it := range items {
		fmt.Println(it)
	}
	// Output:
	// turn 1 items: 2
	// turn 2 items: 4
	// turn 3 items: 6
	// turn 4 items: 5
	// {"role":"user","content":"fact 1"}
	// {"role":"user","content":"fact 2"}
	// {"role":"user","content":"fact 3"}
	// {"role":"user","content":"fact 4"}
	// {"id":"cmp_1","type":"compaction","encrypted_content":"gAAAA..."}
}
