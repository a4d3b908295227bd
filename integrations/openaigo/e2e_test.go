package openaigo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// The end-to-end script: four user turns, each in a new process (the
// store is reopened), with two parallel tool calls after reasoning, a
// hosted MCP approval, a two-step tool chain and reasoning before every
// assistant message; every reasoning item carries encrypted_content
// (store=false, include reasoning.encrypted_content).
var e2eUsers = []string{
	`{"role":"user","content":"What's the weather in Paris and in Rome?"}`,
	`{"role":"user","content":"Ask the wiki what Go is."}`,
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"Convert 5 USD to EUR, then tell me the time in Tokyo."}]}`,
	`{"role":"user","content":"Thanks!"}`,
}

func enc(id string) string {
	return "gAAAAABp" + strings.Repeat(id, 6) + "=="
}

func reasoningItem(id, summary string) string {
	return fmt.Sprintf(`{"id":%q,"type":"reasoning","summary":[{"type":"summary_text","text":%q}],"encrypted_content":%q}`, id, summary, enc(id))
}

func functionCall(id, callID, name, args string) string {
	return fmt.Sprintf(`{"id":%q,"type":"function_call","status":"completed","arguments":%q,"call_id":%q,"name":%q}`, id, args, callID, name)
}

func assistant(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":%q}],"role":"assistant"}`, id, text)
}

// e2eResponses are the fake API's answers, call by call.
var e2eResponses = [][]string{
	{reasoningItem("rs_1", "Two cities: two weather calls."), functionCall("fc_1", "call_1", "weather", `{"city":"Paris"}`), functionCall("fc_2", "call_2", "weather", `{"city":"Rome"}`)},
	{reasoningItem("rs_2", "Summarise both."), assistant("msg_1", "Paris 18°C and clear, Rome 24°C and sunny.")},
	{reasoningItem("rs_3", "The wiki tool needs approval."), `{"id":"mcpr_1","type":"mcp_approval_request","arguments":"{\"question\":\"What is Go?\"}","name":"ask_question","server_label":"deepwiki"}`},
	{`{"id":"mcp_1","type":"mcp_call","approval_request_id":"mcpr_1","arguments":"{\"question\":\"What is Go?\"}","error":null,"name":"ask_question","output":"Go is a programming language.","server_label":"deepwiki","status":"completed"}`, reasoningItem("rs_4", "Relay the answer."), assistant("msg_2", "Go is a programming language designed at Google.")},
	{reasoningItem("rs_5", "Convert first, time next."), functionCall("fc_3", "call_3", "convert", `{"amount":5,"from":"USD","to":"EUR"}`), functionCall("fc_4", "call_4", "lookup_tz", `{"city":"Tokyo"}`)},
	{reasoningItem("rs_6", "Now the time."), functionCall("fc_5", "call_5", "time", `{"tz":"Asia/Tokyo"}`)},
	{assistant("msg_3", "5 USD is 4.60 EUR; it is 21:04 in Tokyo.")},
	{reasoningItem("rs_7", "Polite close."), assistant("msg_4", "You're welcome!")},
}

func e2eScript(call int, _ []session.Item) [][]byte {
	if call > len(e2eResponses) {
		return [][]byte{[]byte(assistant(fmt.Sprintf("msg_extra_%d", call), "extra"))}
	}
	out := make([][]byte, len(e2eResponses[call-1]))
	for i, s := range e2eResponses[call-1] {
		out[i] = []byte(s)
	}
	return out
}

// runTool is the tools of the script: deterministic outputs.
func runTool(call responses.ResponseFunctionToolCall) string {
	return fmt.Sprintf(`{"type":"function_call_output","call_id":%q,"output":%q}`, call.CallID, "result of "+call.Name+" "+call.Arguments)
}

var e2eBase = responses.ResponseNewParams{
	Model:   "gpt-5",
	Store:   openai.Bool(false),
	Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	Tools: []responses.ToolUnionParam{
		responses.ToolParamOfFunction("weather", map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false),
		responses.ToolParamOfMcp("deepwiki"),
	},
}

// e2eLog is what one run of the script saw.
type e2eLog struct {
	window        int
	calls         int      // requests the fake answered
	rejected      []string // the fake's rejections
	empty         int      // requests without input items
	sent          int      // input items sent, over all calls
	wholeCalls    int      // calls whose window held the whole history
	wholeIdentity int      // of those, calls whose input was byte-identical to the by-hand slice
	historyLen    int
	dsn           string
}

// runE2E runs the script with the window w on a new SQLite file, a store
// reopened for every user turn.
func runE2E(t *testing.T, w int) e2eLog {
	ctx := context.Background()
	api := newFakeAPI(t, e2eScript)
	client := newClient(api.URL())
	log := e2eLog{window: w, dsn: sqliteURL(t)}
	var byHand [][]byte // what a user keeps by hand: each item's JSON, as given and as the API sent it
	keep := func(raws ...[]byte) { byHand = append(byHand, raws...) }
	for _, user := range e2eUsers {
		st, err := adapters.Open(ctx, log.dsn)
		require.NoError(t, err)
		s, err := st.Session("conversation-1")
		require.NoError(t, err)
		h := openaigo.New(s, openaigo.Options{Window: w})
		require.NoError(t, h.AddInput(ctx, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(user))))
		keep([]byte(user))
		for {
			params, err := h.Params(ctx, e2eBase)
			require.NoError(t, err)
			whole := len(byHand) <= w
			resp, err := client.Responses.New(ctx, params)
			if isRejection(err) {
				resp, err = client.Responses.New(ctx, params, option.WithHeader("X-Fake-Lenient", "1"))
			}
			require.NoError(t, err)
			sent := api.lastInput()
			log.sent += len(sent)
			if whole {
				log.wholeCalls++
				if sameItems(sent, byHand) {
					log.wholeIdentity++
				} else {
					t.Errorf("window %d, call %d: the input sent is not the by-hand slice:\n sent    %s\n by hand %s", w, log.wholeCalls, joinRaw(sent), joinRaw(byHand))
				}
			}
			require.NoError(t, h.AddResponse(ctx, resp))
			for _, o := range resp.Output {
				keep([]byte(o.RawJSON()))
			}
			var outs []json.RawMessage
			for _, o := range resp.Output {
				switch o.Type {
				case "function_call":
					outs = append(outs, json.RawMessage(runTool(o.AsFunctionCall())))
				case "mcp_approval_request":
					outs = append(outs, json.RawMessage(fmt.Sprintf(`{"type":"mcp_approval_response","approval_request_id":%q,"approve":true}`, o.ID)))
				}
			}
			if len(outs) == 0 {
				break
			}
			require.NoError(t, h.AddJSON(ctx, outs...))
			for _, o := range outs {
				keep(o)
			}
		}
		all, err := session.All(ctx, s)
		require.NoError(t, err)
		require.Equal(t, len(byHand), len(all))
		for i := range all {
			require.Equal(t, string(byHand[i]), string(all[i].Bytes()), "stored item %d is the by-hand item", i)
		}
		require.NoError(t, st.Close())
	}
	log.calls, log.empty, log.rejected = api.stats()
	log.historyLen = len(byHand)
	return log
}

func sameItems(sent []json.RawMessage, byHand [][]byte) bool {
	if len(sent) != len(byHand) {
		return false
	}
	for i := range sent {
		if !bytes.Equal(sent[i], byHand[i]) {
			return false
		}
	}
	return true
}

func joinRaw[T ~[]byte](raws []T) string {
	var b strings.Builder
	for i, r := range raws {
		if i > 0 {
			b.WriteString(" ")
		}
		b.Write(r)
	}
	return b.String()
}

func TestEndToEnd(t *testing.T) {
	var whole e2eLog
	t.Run("whole history", func(t *testing.T) {
		whole = runE2E(t, openaigo.Everything)
		t.Logf("window=all: calls answered %d (scripted %d), rejections %d, input items sent %d, history %d items; %d/%d calls byte-identical to the by-hand slice",
			whole.calls, len(e2eResponses), len(whole.rejected), whole.sent, whole.historyLen, whole.wholeIdentity, whole.wholeCalls)
		require.Equal(t, len(e2eResponses), whole.calls)
		require.Empty(t, whole.rejected)
		require.Equal(t, whole.calls, whole.wholeCalls)
		require.Equal(t, whole.calls, whole.wholeIdentity)
	})
	n := whole.historyLen
	if n == 0 {
		n = 28
	}
	t.Run("every window", func(t *testing.T) {
		var rows []string
		totalCalls, totalRejected, windows, totalEmpty := 0, 0, 0, 0
		byMessage := map[string]int{}
		for w := 1; w <= n; w++ {
			l := runE2E(t, w)
			windows++
			totalCalls += l.calls
			totalRejected += len(l.rejected)
			totalEmpty += l.empty
			for _, m := range l.rejected {
				byMessage[ruleOf(m)]++
			}
			first := ""
			if len(l.rejected) > 0 {
				first = "  first: " + l.rejected[0]
			}
			rows = append(rows, fmt.Sprintf("window %2d: calls %d, rejected %d, empty inputs %d, items sent %3d, whole-history calls %d/%d byte-identical%s",
				w, l.calls, len(l.rejected), l.empty, l.sent, l.wholeIdentity, l.wholeCalls, first))
		}
		t.Logf("windows 1..%d (history of %d items), each a new SQLite file reopened every turn:\n%s\ntotal: %d windows, %d calls answered, %d rejected (%v), %d requests with an empty input",
			n, n, strings.Join(rows, "\n"), windows, totalCalls, totalRejected, byMessage, totalEmpty)
		if totalRejected > 0 {
			t.Errorf("the fake API rejected %d windowed requests (%v): history.ModelInput cut a window the API refuses (issue 20, part 1)", totalRejected, byMessage)
		}
	})
}

// ruleOf names the rule a rejection message is about.
func ruleOf(msg string) string {
	switch {
	case strings.Contains(msg, "required 'reasoning' item"):
		return "item without its reasoning"
	case strings.Contains(msg, "required following item"):
		return "reasoning without its following item"
	case strings.HasPrefix(msg, "No tool call found"):
		return "orphan output"
	case strings.HasPrefix(msg, "No tool output found"):
		return "call without output"
	}
	return msg
}

// TestFakeAPIRules: the fake refuses what the API refuses (so its zero
// rejections mean something).
func TestFakeAPIRules(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, e2eScript)
	client := newClient(api.URL())
	send := func(items ...string) error {
		in := make(responses.ResponseInputParam, len(items))
		for i, s := range items {
			in[i] = openaigo.InputParam(session.MustItem(s))
		}
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: in}})
		return err
	}
	user := e2eUsers[0]
	require.NoError(t, send(user)) // call 1: rs_1, fc_1, fc_2
	r := e2eResponses[0]
	o1 := `{"type":"function_call_output","call_id":"call_1","output":"x"}`
	o2 := `{"type":"function_call_output","call_id":"call_2","output":"y"}`
	cases := []struct {
		items []string
		want  string
	}{
		{[]string{user, o1}, "No tool call found for function call output with call_id call_1."},
		{[]string{user, r[0], r[1], r[2], o1}, "No tool output found for function call call_2."},
		{[]string{user, r[1], r[2], o1, o2}, "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'."},
		{[]string{user, r[0], r[2], o2}, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{[]string{user, r[0]}, "Item 'rs_1' of type 'reasoning' was provided without its required following item."},
		{[]string{`{"type":"mcp_approval_response","approval_request_id":"mcpr_9","approve":true}`}, "No approval request found for mcp_approval_response with approval_request_id mcpr_9."},
	}
	for _, c := range cases {
		err := send(c.items...)
		require.Error(t, err)
		require.Equal(t, c.want, apiMessage(err))
	}
	require.NoError(t, send(user, r[0], r[1], r[2], o1, o2))
	_, _, rejected := api.stats()
	require.Len(t, rejected, len(cases))
}
