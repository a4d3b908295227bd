package openaigo_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// fakeAPI speaks enough of the Responses API for the tests: POST
// /v1/responses answers with the output items script returns for the
// request's input, after enforcing the input rules the API enforces, with
// its own error texts:
//
//   - an output whose call is not in the input: "No tool call found for
//     function call output with call_id X."
//   - a call without its output: "No tool output found for function call X."
//   - an item the API produced after a reasoning item, sent without that
//     reasoning item: "Item 'X' of type 'T' was provided without its
//     required 'reasoning' item: 'R'."
//   - a reasoning item the API produced, sent without the item that
//     followed it in its response right after it: "Item 'R' of type
//     'reasoning' was provided without its required following item."
//
// and, with a text of its own (the API resolves stored approval requests;
// with store=false the request must be in the input), an MCP approval
// response without its request. A request with the header X-Fake-Lenient
// is answered without the checks (the script goes on after a rejection);
// its rejection was counted already.
//
// Which item needs which reasoning item is learnt from the responses the
// fake sent: it knows only items it produced, by id.
type fakeAPI struct {
	srv    *httptest.Server
	script func(call int, input []session.Item) [][]byte

	mu       sync.Mutex
	calls    int // requests answered with a response
	rejected []string
	empty    int // requests without input items
	inputs   [][]json.RawMessage
	known    map[string]producedItem
}

// producedItem is what the fake knows of an item it produced.
type producedItem struct {
	typ       string
	reasoning string // the reasoning item before it in its response
	following string // for a reasoning item: the item right after it
}

func newFakeAPI(t testing.TB, script func(call int, input []session.Item) [][]byte) *fakeAPI {
	a := &fakeAPI{script: script, known: map[string]producedItem{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAPI) URL() string { return a.srv.URL }

func (a *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, "We could not parse the JSON body of your request.")
		return
	}
	var raws []json.RawMessage
	if len(req.Input) > 0 && req.Input[0] == '[' {
		if err := json.Unmarshal(req.Input, &raws); err != nil {
			apiError(w, "Invalid 'input': expected an array of items.")
			return
		}
	}
	input := make([]session.Item, len(raws))
	for i, raw := range raws {
		it, err := session.NewItem(raw)
		if err != nil {
			apiError(w, fmt.Sprintf("Invalid 'input[%d]': expected an object.", i))
			return
		}
		input[i] = it
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inputs = append(a.inputs, raws)
	if r.Header.Get("X-Fake-Lenient") == "" {
		if msg := a.check(input); msg != "" {
			a.rejected = append(a.rejected, msg)
			apiError(w, msg)
			return
		}
	}
	if len(input) == 0 {
		a.empty++
	}
	a.calls++
	out := a.script(a.calls, input)
	id := fmt.Sprintf("resp_%03d", a.calls)
	a.learn(out)
	writeResponse(w, id, out)
}

// check returns the API's error for input, or "".
func (a *fakeAPI) check(input []session.Item) string {
	present := map[string]bool{}
	for _, it := range input {
		if id := it.ID(); id != "" {
			present[id] = true
		}
	}
	calls := map[history.PairKey]int{}
	outputs := map[history.PairKey]int{}
	for i, it := range input {
		if k, ok := history.CallKey(it); ok {
			calls[k] = i
		}
		if k, ok := history.AnsweredKey(it); ok {
			outputs[k] = i
		}
	}
	for i, it := range input {
		if k, ok := history.AnsweredKey(it); ok {
			if j, ok := calls[k]; !ok || j > i {
				if k.Type == history.TypeMCPApprovalRequest {
					return fmt.Sprintf("No approval request found for mcp_approval_response with approval_request_id %s.", k.ID)
				}
				return fmt.Sprintf("No tool call found for function call output with call_id %s.", k.ID)
			}
		}
		if k, ok := history.CallKey(it); ok && k.Type != history.TypeMCPApprovalRequest {
			if j, ok := outputs[k]; !ok || j < i {
				return fmt.Sprintf("No tool output found for function call %s.", k.ID)
			}
		}
		p, ok := a.known[it.ID()]
		if !ok {
			continue
		}
		if p.reasoning != "" && !present[p.reasoning] {
			return fmt.Sprintf("Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'.", it.ID(), p.typ, p.reasoning)
		}
		if p.typ == history.TypeReasoning && p.following != "" && (i+1 >= len(input) || input[i+1].ID() != p.following) {
			return fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID())
		}
	}
	return ""
}

// learn records which reasoning item each produced item needs.
func (a *fakeAPI) learn(out [][]byte) {
	items := make([]session.Item, len(out))
	for i, o := range out {
		items[i] = session.MustItem(string(o))
	}
	reasoning := ""
	for i, it := range items {
		p := producedItem{typ: it.Type(), reasoning: reasoning}
		if p.typ == history.TypeReasoning {
			p.reasoning = ""
			reasoning = it.ID()
			if i+1 < len(items) {
				p.following = items[i+1].ID()
			}
		}
		if it.ID() != "" {
			a.known[it.ID()] = p
		}
	}
}

func apiError(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": "input", "code": nil,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// stats returns the counts so far.
func (a *fakeAPI) stats() (calls, empty int, rejected []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, a.empty, append([]string(nil), a.rejected...)
}

// lastInput returns the input items of the last request, raw as sent.
func (a *fakeAPI) lastInput() []json.RawMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.inputs) == 0 {
		return nil
	}
	return a.inputs[len(a.inputs)-1]
}

// isRejection reports whether err is one of the fake's 400 answers.
func isRejection(err error) bool {
	var e *openai.Error
	return errors.As(err, &e) && e.StatusCode == http.StatusBadRequest
}

// apiMessage returns the API's error message in err, or err's text.
func apiMessage(err error) string {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
