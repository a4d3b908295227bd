package openaigo_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// fakeConv speaks the Conversations API (/v1/conversations) in front of a
// fakeAPI, which answers every other request (POST /v1/responses, with its
// input rules). Its JSON shapes are openai-go's conversations types and
// the API reference's:
//
//   - POST /v1/conversations {items?, metadata?} -> Conversation
//     {id, object: "conversation", created_at, metadata};
//   - GET and DELETE /v1/conversations/{id} -> Conversation,
//     ConversationDeletedResource {id, object: "conversation.deleted", deleted};
//   - POST /v1/conversations/{id}/items {items} -> ConversationItemList
//     {object: "list", data, first_id, last_id, has_more: false};
//   - GET /v1/conversations/{id}/items?order=&limit=&after= -> a page of
//     ConversationItemList, order desc by default, limit 1..100 (default
//     20), after an item id, has_more when items remain;
//   - GET and DELETE /v1/conversations/{id}/items/{item_id} -> the item,
//     and the Conversation after the delete.
//
// As the API does, it gives every item sent without an id an id of its
// own (msg_, fc_, ... and 48 hex digits): an item read back is the JSON
// sent with "id" first. It keeps an id an item was sent with. It refuses,
// with the API's 400 error shape: a body that is not JSON, no items or
// more than 20, an item that is not an object, a type that is not a
// string, a message without role or content, a top-level member the
// create-item schema does not have (provider_data, the SDK's _agents_
// keys), the "__fake_id__" placeholder id, an id the conversation holds
// already, a limit out of 1..100 and an unknown after cursor; and with
// 404 an unknown conversation or item. What it does not model: the API
// also rewrites a message's shape (type, status, content parts) when it
// stores it; the fake keeps the members it was sent.
//
// Failures are injected per endpoint (failNext): a status (429, 500, 503)
// answered before or after the write applied, or a connection dropped
// after it applied (a lost reply).
//
// Requests to /v1/responses are checked for duplicate ids (the API's
// "Duplicate item found with id X."), then handed to the fakeAPI with
// each conversation-assigned id replaced by the id of the response item
// the conversation item was stored from (found by its content, without
// ids): the fakeAPI's pairing and reasoning rules then hold by the items'
// identity, whichever ids the conversation gave them.
type fakeConv struct {
	api *fakeAPI
	srv *httptest.Server

	mu        sync.Mutex
	convs     map[string]*fakeConversation
	seq       int
	fail      map[string][]injected // by endpoint (endpointOf)
	aliases   map[string]string     // conversation item id -> the response item's id
	produced  map[string]string     // fingerprint without id -> id, of the items the fakeAPI produced
	rejected  []string              // the fake's own 400s on /v1/responses (duplicate ids)
	requests  map[string]int        // by endpoint, every attempt
	before    map[string][]func()   // run before the next request to an endpoint is handled (beforeNext)
	convFails int                   // injected failures answered
	aliased   int                   // input items to /v1/responses whose id was put back
}

type fakeConversation struct {
	id       string
	created  int64
	metadata json.RawMessage
	items    []storedConvItem
	ids      map[string]bool
}

type storedConvItem struct {
	id  string
	raw []byte
}

// injected is one failure to answer.
type injected struct {
	code    int  // HTTP status; dropConn to close the connection with no reply
	applied bool // a write applies before the failure is answered
}

const dropConn = -1

func newFakeConv(t testing.TB, api *fakeAPI) *fakeConv {
	c := newFakeConvHandler(api)
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

// newFakeConvHandler returns a fakeConv without its server: its serve
// method is the handler.
func newFakeConvHandler(api *fakeAPI) *fakeConv {
	return &fakeConv{
		api: api, convs: map[string]*fakeConversation{}, fail: map[string][]injected{},
		aliases: map[string]string{}, produced: map[string]string{}, requests: map[string]int{},
		before: map[string][]func(){},
	}
}

func (c *fakeConv) URL() string { return c.srv.URL }

// client returns an openai-go client of the fake; retries as openai-go's
// default (2), with short delays.
func (c *fakeConv) client(opts ...option.RequestOption) *openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(c.URL() + "/v1/"), option.WithAPIKey("sk-test-not-a-secret"),
		option.WithMaxRetryDelay(20 * 1e6), // 20 ms
	}
	cl := openai.NewClient(append(base, opts...)...)
	return &cl
}

// failNext queues failures for the next requests to endpoint (endpointOf).
func (c *fakeConv) failNext(endpoint string, fs ...injected) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[endpoint] = append(c.fail[endpoint], fs...)
}

// beforeNext runs f before the next request to endpoint is handled, as
// another client's requests landing in between.
func (c *fakeConv) beforeNext(endpoint string, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before[endpoint] = append(c.before[endpoint], f)
}

func (c *fakeConv) count(endpoint string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[endpoint]
}

// itemsOf returns the raw items of conversation id, oldest first.
func (c *fakeConv) itemsOf(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	conv := c.convs[id]
	if conv == nil {
		return nil
	}
	out := make([]string, len(conv.items))
	for i, it := range conv.items {
		out[i] = string(it.raw)
	}
	return out
}

func (c *fakeConv) conversationCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.convs)
}

// endpointOf names a request's endpoint: "POST conversations", "GET
// conversation", "DELETE conversation", "POST items", "GET items", "GET
// item", "DELETE item", or "" for any other path.
func endpointOf(r *http.Request) (endpoint string, parts []string) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/conversations")
	if !ok {
		return "", nil
	}
	rest = strings.Trim(rest, "/")
	if rest != "" {
		parts = strings.Split(rest, "/")
	}
	switch {
	case len(parts) == 0:
		return r.Method + " conversations", parts
	case len(parts) == 1:
		return r.Method + " conversation", parts
	case len(parts) == 2 && parts[1] == "items":
		return r.Method + " items", parts
	case len(parts) == 3 && parts[1] == "items":
		return r.Method + " item", parts
	}
	return r.Method + " ?", parts
}

func (c *fakeConv) serve(w http.ResponseWriter, r *http.Request) {
	endpoint, parts := endpointOf(r)
	if endpoint == "" {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/responses" {
			c.responses(w, r)
			return
		}
		c.api.serve(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	var f func()
	if q := c.before[endpoint]; len(q) > 0 {
		f, c.before[endpoint] = q[0], q[1:]
	}
	c.mu.Unlock()
	if f != nil {
		f()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests[endpoint]++
	var inj *injected
	if q := c.fail[endpoint]; len(q) > 0 {
		inj, c.fail[endpoint] = &q[0], q[1:]
		if inj.code == 0 { // a placeholder: this request passes
			inj = nil
		} else {
			c.convFails++
		}
	}
	if inj != nil && !inj.applied {
		answerInjected(w, *inj)
		return
	}
	rec := httptest.NewRecorder()
	c.handle(rec, r, endpoint, parts, body)
	if inj != nil {
		answerInjected(w, *inj)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func answerInjected(w http.ResponseWriter, inj injected) {
	if inj.code == dropConn {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(inj.code)
	typ := "server_error"
	if inj.code == http.StatusTooManyRequests {
		typ = "rate_limit_exceeded"
	}
	_, _ = fmt.Fprintf(w, `{"error":{"message":"The fake answers %d.","type":%q,"param":null,"code":null}}`, inj.code, typ)
}

// handle answers a conversations request; c.mu is held.
func (c *fakeConv) handle(w http.ResponseWriter, r *http.Request, endpoint string, parts []string, body []byte) {
	var conv *fakeConversation
	if len(parts) > 0 {
		if conv = c.convs[parts[0]]; conv == nil {
			convError(w, http.StatusNotFound, fmt.Sprintf("Conversation with id '%s' not found.", parts[0]), nil)
			return
		}
	}
	switch endpoint {
	case "POST conversations":
		var req struct {
			Items    []json.RawMessage `json:"items"`
			Metadata json.RawMessage   `json:"metadata"`
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				convError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", nil)
				return
			}
		}
		if len(req.Items) > 20 {
			convError(w, http.StatusBadRequest, fmt.Sprintf("Invalid 'items': array too long. Expected an array with maximum length 20, but got an array with length %d instead.", len(req.Items)), "items")
			return
		}
		c.seq++
		conv = &fakeConversation{id: fmt.Sprintf("conv_%048x", c.seq), created: 1764979200 + int64(c.seq), metadata: req.Metadata, ids: map[string]bool{}}
		if len(conv.metadata) == 0 || string(conv.metadata) == "null" {
			conv.metadata = json.RawMessage(`{}`)
		}
		if _, msg := c.validate(conv, req.Items); msg != "" {
			convError(w, http.StatusBadRequest, msg, "items")
			return
		}
		c.store(conv, req.Items)
		c.convs[conv.id] = conv
		writeJSON(w, conv.resource())
	case "GET conversation":
		writeJSON(w, conv.resource())
	case "DELETE conversation":
		delete(c.convs, conv.id)
		writeJSON(w, map[string]any{"id": conv.id, "object": "conversation.deleted", "deleted": true})
	case "POST items":
		var req struct {
			Items *[]json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			convError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", nil)
			return
		}
		if req.Items == nil {
			convError(w, http.StatusBadRequest, "Missing required parameter: 'items'.", "items")
			return
		}
		items := *req.Items
		switch {
		case len(items) == 0:
			convError(w, http.StatusBadRequest, "Invalid 'items': empty array. Expected an array with minimum length 1, but got an empty array instead.", "items")
			return
		case len(items) > 20:
			convError(w, http.StatusBadRequest, fmt.Sprintf("Invalid 'items': array too long. Expected an array with maximum length 20, but got an array with length %d instead.", len(items)), "items")
			return
		}
		if _, msg := c.validate(conv, items); msg != "" {
			convError(w, http.StatusBadRequest, msg, "items")
			return
		}
		added := c.store(conv, items)
		writeJSON(w, listOf(added, false))
	case "GET items":
		q := r.URL.Query()
		order := q.Get("order")
		if order == "" {
			order = "desc"
		}
		if order != "asc" && order != "desc" {
			convError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value: '%s'. Supported values are: 'asc' and 'desc'.", order), "order")
			return
		}
		limit := 20
		if s := q.Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 100 {
				convError(w, http.StatusBadRequest, fmt.Sprintf("Invalid 'limit': integer out of range. Expected a value between 1 and 100, but got %s instead.", s), "limit")
				return
			}
			limit = n
		}
		seq := append([]storedConvItem(nil), conv.items...)
		if order == "desc" {
			for i, j := 0, len(seq)-1; i < j; i, j = i+1, j-1 {
				seq[i], seq[j] = seq[j], seq[i]
			}
		}
		if after := q.Get("after"); after != "" {
			at := -1
			for i, it := range seq {
				if it.id == after {
					at = i
				}
			}
			if at < 0 {
				convError(w, http.StatusBadRequest, fmt.Sprintf("Invalid 'after': item with id '%s' not found.", after), "after")
				return
			}
			seq = seq[at+1:]
		}
		more := len(seq) > limit
		if more {
			seq = seq[:limit]
		}
		writeJSON(w, listOf(seq, more))
	case "GET item", "DELETE item":
		at := -1
		for i, it := range conv.items {
			if it.id == parts[2] {
				at = i
			}
		}
		if at < 0 {
			convError(w, http.StatusNotFound, fmt.Sprintf("Item with id '%s' not found.", parts[2]), nil)
			return
		}
		if endpoint == "GET item" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(conv.items[at].raw)
			return
		}
		delete(conv.ids, parts[2])
		conv.items = append(conv.items[:at:at], conv.items[at+1:]...)
		writeJSON(w, conv.resource())
	default:
		convError(w, http.StatusNotFound, "Invalid URL ("+r.Method+" "+r.URL.Path+")", nil)
	}
}

// validate returns the API's 400 message for items added to conv, or "".
func (c *fakeConv) validate(conv *fakeConversation, items []json.RawMessage) (int, string) {
	seen := map[string]bool{}
	for i, raw := range items {
		it, err := session.NewItem(raw)
		if err != nil {
			return i, fmt.Sprintf("Invalid type for 'items[%d]': expected an object, but got %s instead.", i, kindOf(raw))
		}
		typ, hasType := it.Field("type")
		if hasType && (len(typ) == 0 || typ[0] != '"') {
			return i, fmt.Sprintf("Invalid type for 'items[%d].type': expected a string.", i)
		}
		if !hasType || it.Type() == "message" {
			if !it.HasField("role") || !it.HasField("content") {
				return i, fmt.Sprintf("Missing required parameter: 'items[%d].%s'.", i, map[bool]string{true: "content", false: "role"}[it.HasField("role")])
			}
		}
		var members map[string]json.RawMessage
		_ = json.Unmarshal(raw, &members)
		for k := range members {
			if k == "provider_data" || strings.HasPrefix(k, "_agents_") {
				return i, fmt.Sprintf("Unknown parameter: 'items[%d].%s'.", i, k)
			}
		}
		if id, ok := it.StringField("id"); ok {
			switch {
			case id == "__fake_id__":
				return i, fmt.Sprintf("Invalid 'items[%d].id': '__fake_id__'.", i)
			case conv.ids[id] || seen[id]:
				return i, fmt.Sprintf("Item with id '%s' already exists.", id)
			}
			seen[id] = true
		}
	}
	return -1, ""
}

// store adds items (validated) to conv, giving an id to each item sent
// without one; c.mu is held.
func (c *fakeConv) store(conv *fakeConversation, items []json.RawMessage) []storedConvItem {
	var added []storedConvItem
	for _, raw := range items {
		it := session.MustItem(compactJSON(raw))
		id, ok := it.StringField("id")
		b := it.Bytes()
		if !ok || id == "" {
			c.seq++
			id = fmt.Sprintf("%s_%048x", idPrefix(it.Type()), c.seq)
			if fp, err := history.Fingerprint(it, true); err == nil {
				if orig, ok := c.produced[fp]; ok {
					c.aliases[id] = orig
				}
			}
			b = withID(b, id)
		}
		conv.ids[id] = true
		s := storedConvItem{id: id, raw: b}
		conv.items = append(conv.items, s)
		added = append(added, s)
	}
	return added
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// withID returns the compact object b with "id" as its first member, in
// place of any "id" it had.
func withID(b []byte, id string) []byte {
	b = []byte(compactJSON(b))
	if v, ok := session.MustItem(string(b)).Field("id"); ok {
		old := append([]byte(`"id":`), v...)
		switch {
		case bytes.Contains(b, append(slices.Clone(old), ',')):
			b = bytes.Replace(b, append(slices.Clone(old), ','), nil, 1)
		case bytes.Contains(b, append([]byte(","), old...)):
			b = bytes.Replace(b, append([]byte(","), old...), nil, 1)
		default:
			b = bytes.Replace(b, old, nil, 1)
		}
	}
	q, _ := json.Marshal(id)
	if string(b) == "{}" {
		return []byte(`{"id":` + string(q) + `}`)
	}
	return append([]byte(`{"id":`+string(q)+`,`), b[1:]...)
}

// replaceID returns the compact object b with its string id old replaced
// by id, in place.
func replaceID(b []byte, old, id string) []byte {
	o, _ := json.Marshal(old)
	n, _ := json.Marshal(id)
	return bytes.Replace([]byte(compactJSON(b)), []byte(`"id":`+string(o)), []byte(`"id":`+string(n)), 1)
}

func idPrefix(typ string) string {
	switch typ {
	case "", "message":
		return "msg"
	case "function_call":
		return "fc"
	case "function_call_output":
		return "fco"
	case "reasoning":
		return "rs"
	}
	return "item"
}

func kindOf(raw json.RawMessage) string {
	switch t := strings.TrimSpace(string(raw)); {
	case t == "null":
		return "null"
	case strings.HasPrefix(t, "["):
		return "an array"
	case strings.HasPrefix(t, `"`):
		return "a string"
	}
	return "a number or boolean"
}

func (conv *fakeConversation) resource() map[string]any {
	return map[string]any{"id": conv.id, "object": "conversation", "created_at": conv.created, "metadata": conv.metadata}
}

func listOf(items []storedConvItem, more bool) map[string]any {
	data := make([]json.RawMessage, len(items))
	first, last := "", ""
	for i, it := range items {
		data[i] = it.raw
	}
	if len(items) > 0 {
		first, last = items[0].id, items[len(items)-1].id
	}
	return map[string]any{"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": more}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func convError(w http.ResponseWriter, code int, msg string, param any) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": param, "code": nil,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// responses checks a POST /v1/responses for duplicate ids, puts back the
// response items' own ids in place of the conversation's, and hands it to
// the fakeAPI; it learns the items the fakeAPI produced.
func (c *fakeConv) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err == nil && len(req["input"]) > 0 && req["input"][0] == '[' {
		var input []json.RawMessage
		if err := json.Unmarshal(req["input"], &input); err == nil {
			c.mu.Lock()
			seen := map[string]bool{}
			msg := ""
			for i, raw := range input {
				it, err := session.NewItem(raw)
				if err != nil {
					continue
				}
				id := it.ID()
				if id == "" {
					continue
				}
				if seen[id] && msg == "" && r.Header.Get("X-Fake-Lenient") == "" {
					msg = fmt.Sprintf("Duplicate item found with id %s.", id)
				}
				seen[id] = true
				if orig, ok := c.aliases[id]; ok {
					input[i] = replaceID(raw, id, orig)
					c.aliased++
				}
			}
			if msg != "" {
				c.rejected = append(c.rejected, msg)
				c.mu.Unlock()
				apiError(w, msg)
				return
			}
			c.mu.Unlock()
			req["input"], _ = json.Marshal(input)
			body, _ = json.Marshal(req)
		}
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	rec := httptest.NewRecorder()
	c.api.serve(rec, r2)
	if rec.Code == http.StatusOK {
		var resp struct {
			Output []json.RawMessage `json:"output"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &resp) == nil {
			c.mu.Lock()
			for _, raw := range resp.Output {
				it, err := session.NewItem(raw)
				if err != nil || it.ID() == "" {
					continue
				}
				if fp, err := history.Fingerprint(it, true); err == nil {
					c.produced[fp] = it.ID()
				}
			}
			c.mu.Unlock()
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// aliasedInputs returns how many input items sent to /v1/responses had
// their conversation id put back to the response item's.
func (c *fakeConv) aliasedInputs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.aliased
}

// stats returns the duplicate-id rejections and the injected failures
// answered so far.
func (c *fakeConv) stats() (rejected []string, injectedFailures int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.rejected...), c.convFails
}
