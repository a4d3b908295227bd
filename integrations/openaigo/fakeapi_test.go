package openaigo_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
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
	routes   map[string]http.HandlerFunc // by path prefix: the other endpoints (handle)
	stored   map[string][]session.Item   // a stored response's context: its input, then its output
	comp     fakeCompaction              // fakecompact_test.go
	fail     []int                       // status codes to answer the next requests with, in order
}

// producedItem is what the fake knows of an item it produced.
type producedItem struct {
	typ       string
	reasoning string // the reasoning item before it in its response
	following string // for a reasoning item: the item right after it
}

func newFakeAPI(t testing.TB, script func(call int, input []session.Item) [][]byte) *fakeAPI {
	a := &fakeAPI{script: script, known: map[string]producedItem{}, routes: map[string]http.HandlerFunc{}, stored: map[string][]session.Item{}}
	a.handle("/v1/responses/compact", a.compact)
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAPI) URL() string { return a.srv.URL }

// handle routes the requests whose path starts with prefix to h (the
// longest prefix wins); POST /v1/responses is the fake's own.
func (a *fakeAPI) handle(prefix string, h http.HandlerFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.routes[prefix] = h
}

// failNext makes the next len(codes) requests, whatever their endpoint,
// fail with those status codes (429, 500, ...), as the API does under
// load; openai-go retries them when its client allows retries.
func (a *fakeAPI) failNext(codes ...int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = append(a.fail, codes...)
}

func (a *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	var code int
	if len(a.fail) > 0 {
		code, a.fail = a.fail[0], a.fail[1:]
	}
	var route http.HandlerFunc
	best := ""
	for p, h := range a.routes {
		if strings.HasPrefix(r.URL.Path, p) && len(p) > len(best) {
			best, route = p, h
		}
	}
	a.mu.Unlock()
	switch {
	case code != 0:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"error":{"message":"The fake answers %d.","type":"server_error","param":null,"code":null}}`, code)
		return
	case route != nil:
		route(w, r)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/responses":
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req struct {
		Input    json.RawMessage `json:"input"`
		Store    *bool           `json:"store"`
		Previous string          `json:"previous_response_id"`
	}
	if !decodeBody(w, r, &req) {
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
	context := input
	if req.Previous != "" {
		prev, ok := a.stored[req.Previous]
		if !ok {
			a.rejected = append(a.rejected, "unknown previous response "+req.Previous)
			apiErrorCode(w, http.StatusNotFound, fmt.Sprintf("Previous response with id '%s' not found.", req.Previous))
			return
		}
		context = append(slices.Clone(prev), input...)
	}
	if r.Header.Get("X-Fake-Lenient") == "" {
		if msg := a.check(context); msg != "" {
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
	if req.Store == nil || *req.Store {
		chain := slices.Clone(context)
		for _, o := range out {
			chain = append(chain, session.MustItem(string(o)))
		}
		a.stored[id] = chain
	}
	writeResponse(w, id, out)
}

// check returns the API's error for input, or "": besides the pairing
// and reasoning rules, an item id sent twice, and a compaction item the
// fake did not produce (or whose content was changed).
func (a *fakeAPI) check(input []session.Item) string {
	present := map[string]bool{}
	for _, it := range input {
		if id := it.ID(); id != "" {
			if present[id] {
				return fmt.Sprintf("Duplicate item found with id %s.", id)
			}
			present[id] = true
		}
		if msg := a.comp.check(it); msg != "" {
			return msg
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

func apiError(w http.ResponseWriter, msg string) { apiErrorCode(w, http.StatusBadRequest, msg) }

func apiErrorCode(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": "input", "code": nil,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
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

// decodeBody reads r's JSON body into v; when it cannot, it answers as the
// API does and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		apiError(w, "We could not parse the JSON body of your request.")
		return false
	}
	return true
}
