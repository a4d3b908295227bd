package openaigo_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/agentsessions/sessions/session"
)

// fakeCompaction is the fake's POST /v1/responses/compact, shaped as the
// API's CompactedResponse (openai-go's responses.CompactedResponse): the
// output is every user message of what it compacts, then one compaction
// item {"type":"compaction","id":"cmp_…","encrypted_content":"…"} whose
// content is opaque. It compacts the input it is given, or, with
// previous_response_id, the stored response's context (its input, then its
// output). A later request may send a compaction item only as the fake
// produced it: another id or a changed content is a 400, as the API
// refuses content it cannot decrypt.
type fakeCompaction struct {
	n        int
	during   func()            // run once, by the next request, before it compacts
	content  map[string]string // compaction item id → its encrypted_content
	requests []compactRequest
}

// compactRequest is what one compaction request asked.
type compactRequest struct {
	Model    string
	Previous string
	Input    int // items sent as input
}

func (c *fakeCompaction) check(it session.Item) string {
	if it.Type() != "compaction" {
		return ""
	}
	got, _ := it.StringField("encrypted_content")
	if want, ok := c.content[it.ID()]; !ok || got != want {
		return fmt.Sprintf("Invalid compaction item '%s': its encrypted content could not be verified.", it.ID())
	}
	return ""
}

func (a *fakeAPI) compact(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req struct {
		Model    string            `json:"model"`
		Input    []json.RawMessage `json:"input"`
		Previous string            `json:"previous_response_id"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	a.mu.Lock()
	during := a.comp.during
	a.comp.during = nil
	a.mu.Unlock()
	if during != nil {
		during() // what happens while the request is out (seconds, against the API)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if req.Model == "" {
		apiError(w, "Missing required parameter: 'model'.")
		return
	}
	var items []session.Item
	if req.Previous != "" {
		prev, ok := a.stored[req.Previous]
		if !ok {
			apiErrorCode(w, http.StatusNotFound, fmt.Sprintf("Previous response with id '%s' not found.", req.Previous))
			return
		}
		items = slices.Clone(prev)
	}
	for i, raw := range req.Input {
		it, err := session.NewItem(raw)
		if err != nil {
			apiError(w, fmt.Sprintf("Invalid 'input[%d]': expected an object.", i))
			return
		}
		items = append(items, it)
	}
	if msg := a.check(items); msg != "" {
		a.rejected = append(a.rejected, "compact: "+msg)
		apiError(w, msg)
		return
	}
	c := &a.comp
	if c.content == nil {
		c.content = map[string]string{}
	}
	c.n++
	c.requests = append(c.requests, compactRequest{Model: req.Model, Previous: req.Previous, Input: len(req.Input)})
	var out bytes.Buffer
	out.WriteByte('[')
	h := sha256.New()
	for _, it := range items {
		h.Write(it.Bytes())
		if isUserMessage(it) {
			if out.Len() > 1 {
				out.WriteByte(',')
			}
			out.Write(it.Bytes())
		}
	}
	id := fmt.Sprintf("cmp_%03d", c.n)
	content := base64.StdEncoding.EncodeToString(h.Sum(nil))
	c.content[id] = content
	if out.Len() > 1 {
		out.WriteByte(',')
	}
	fmt.Fprintf(&out, `{"id":%q,"type":"compaction","encrypted_content":%q}]`, id, content)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"resp_cmp_%03d","object":"response.compaction","created_at":1767225600,"output":%s,"usage":{"input_tokens":%d,"output_tokens":1,"total_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}`,
		c.n, out.Bytes(), len(items), len(items)+1)
}

// isUserMessage is the Python SDK's test of a user message.
func isUserMessage(it session.Item) bool {
	if it.Type() == "message" {
		return it.Role() == "user"
	}
	return it.Role() == "user" && it.HasField("content")
}

// duringCompact makes the next compaction request run f before it
// compacts, as another process's write lands while a compaction is out.
func (a *fakeAPI) duringCompact(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.comp.during = f
}

// compactions returns the compaction requests answered so far.
func (a *fakeAPI) compactions() []compactRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.comp.requests)
}
