package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentsessions/sessions/session"
)

// ErrNonFinite is wrapped by every *NonFiniteError.
var ErrNonFinite = errors.New("history: the item holds a non-finite number, which the Responses API cannot take")

// NonFiniteError reports an item of a model input that holds a NaN,
// Infinity or -Infinity token. Python's json module writes them for
// non-finite floats and session.Item keeps them, but they are not JSON:
// the Responses API cannot take them, and encoding/json refuses them.
// The first such item is reported, at the first such number in it.
type NonFiniteError struct {
	// Index is the item's position in the model input that would have
	// been returned (ModelInput's, Window's or ForModel's result).
	Index int
	// FromNewest is its position counted from the newest item of the
	// history (1 for the newest): session.Latest(ctx, s, FromNewest)
	// starts with it. For ForModel it counts from the end of its items.
	FromNewest int
	// Type and ID name the item: its "type" ("" for a message without
	// one) and its "call_id", or its "id" when it has no call_id.
	Type, ID string
	// Path locates the number in the item: "output.score",
	// "logprobs[1]", `meta["a b"]`.
	Path string
	// Token is NaN, Infinity or -Infinity.
	Token string
}

func (e *NonFiniteError) Error() string {
	name := e.Type
	if name == "" {
		name = "message"
	}
	if e.ID != "" {
		name += " " + strconv.Quote(e.ID)
	}
	return fmt.Sprintf("history: model input item %d (%s, number %d from the newest) holds %s at %s: the Responses API takes finite numbers only",
		e.Index, name, e.FromNewest, e.Token, e.Path)
}

// Unwrap returns ErrNonFinite.
func (e *NonFiniteError) Unwrap() error { return ErrNonFinite }

// ForModel returns items as the model is sent them: without the top-level
// keys the Python SDK strips before a model call
// (strip_internal_input_item_metadata: MetaToolDescription and
// MetaToolTitle), every other byte of an item as it was, and a
// *NonFiniteError for the first item holding a NaN or infinity. It does
// not prune (SafeWindow, Window and ModelInput do); items are not
// modified, and an item with nothing to strip is returned as it is.
func ForModel(items []session.Item) ([]session.Item, error) {
	return forModel(items, nil)
}

// forModel is ForModel over the items keep flags (all when keep is nil).
func forModel(items []session.Item, keep []bool) ([]session.Item, error) {
	out := make([]session.Item, 0, len(items))
	for i, it := range items {
		if keep != nil && !keep[i] {
			continue
		}
		b := it.Bytes()
		if mayHoldNonFinite(it) {
			if path, tok, ok := nonFinite(b); ok {
				id := it.CallID()
				if id == "" {
					id = it.ID()
				}
				return nil, &NonFiniteError{Index: len(out), FromNewest: len(items) - i, Type: it.Type(), ID: id, Path: path, Token: tok}
			}
		}
		if it.HasField(MetaToolDescription) || it.HasField(MetaToolTitle) {
			stripped, err := withoutTopLevel(b, dropMeta)
			if err != nil {
				return nil, fmt.Errorf("history: model input item %d: %w", len(out), err)
			}
			it = stripped
		}
		out = append(out, it)
	}
	return out, nil
}

var (
	nanToken = []byte("NaN")
	infToken = []byte("Infinity")
)

// mayHoldNonFinite reports whether it may hold a NaN or infinity token
// outside its strings; false is certain. It costs no pass over the bytes
// of a top-level string value of a member it knows (the item's member
// index gives the value's end, and a string holds no token), so the long
// arguments, outputs and encrypted reasoning of a history are not read
// again; other values are searched for the two tokens, and so is the rest
// of the item from the first member it does not know.
func mayHoldNonFinite(it session.Item) bool {
	b := it.Bytes()
	i := skipWS(b, 0) + 1 // past '{'
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] == '}' {
			return false
		}
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
		ke := skipString(b, i)
		p := skipWS(b, skipWS(b, ke)+1) // the value, past ':'
		v, ok := knownValue(it, b[i+1:ke-1])
		if !ok || len(v) == 0 || p >= len(b) || &v[0] != &b[p] {
			// An unknown (or repeated) key: search the rest.
			return bytes.Contains(b[p:], nanToken) || bytes.Contains(b[p:], infToken)
		}
		if v[0] != '"' && (bytes.Contains(v, nanToken) || bytes.Contains(v, infToken)) {
			return true
		}
		i = p + len(v)
	}
}

// knownValue returns the value of the top-level member named key when key
// is one of the names Responses items use, without allocating.
func knownValue(it session.Item, key []byte) ([]byte, bool) {
	for _, k := range knownKeys {
		if string(key) == k {
			return it.Field(k)
		}
	}
	return nil, false
}

// knownKeys are the top-level names of Responses-API input items, the ones
// holding long strings first.
var knownKeys = []string{
	"type", "id", "call_id", "arguments", "output", "encrypted_content", "content",
	"name", "status", "role", "summary", "input", "action", "caller", "server_label",
	"approval_request_id", "approve", "reason", "error", "result", "queries", "results",
	"operation", "phase", "created_by", "pending_safety_checks", "acknowledged_safety_checks",
	"tools", "outputs", "code", "container_id", "max_output_length", "execution", "environment",
	MetaToolDescription, MetaToolTitle,
}

// Without returns it without its top-level members named keys, keeping
// every other byte; it is returned as it is when it has none of them.
func Without(it session.Item, keys ...string) (session.Item, error) {
	if !slices.ContainsFunc(keys, it.HasField) {
		return it, nil
	}
	return withoutTopLevel(it.Bytes(), keys)
}

// withoutTopLevel returns the object b without its top-level members named
// (after unescaping) in drop, every occurrence of them, keeping the other
// members' bytes and the separators between them.
func withoutTopLevel(b []byte, drop []string) (session.Item, error) {
	type member struct{ start, end int } // key's quote to value's end
	var ms []member
	var gone []bool
	i := skipWS(b, 0) + 1 // past '{'
	for {
		i = skipWS(b, i)
		if b[i] == '}' {
			break
		}
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
		start := i
		ke := skipString(b, i)
		var key string
		if err := json.Unmarshal(b[start:ke], &key); err != nil {
			return session.Item{}, err
		}
		i = skipWS(b, skipWS(b, ke)+1) // past ':'
		i = skipValue(b, i)
		ms = append(ms, member{start, i})
		gone = append(gone, contains(drop, key))
	}
	var out []byte
	out = append(out, b[:ms[0].start]...)
	first := true
	for j, m := range ms {
		if gone[j] {
			continue
		}
		if !first { // j > 0: the separator that came before this member
			out = append(out, b[ms[j-1].end:m.start]...)
		}
		first = false
		out = append(out, b[m.start:m.end]...)
	}
	out = append(out, b[ms[len(ms)-1].end:]...)
	return session.NewItem(out)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// nonFinite returns the path and spelling of the first NaN, Infinity or
// -Infinity token of the JSON value b, outside strings.
func nonFinite(b []byte) (path, token string, ok bool) {
	s := nfScan{b: b}
	if !s.value(skipWS(b, 0)) {
		return "", "", false
	}
	return s.pathString(), s.token, true
}

// nfScan walks a valid JSON value, keeping the path to where it is.
type nfScan struct {
	b     []byte
	path  []string // ".key", `["key"]` or "[i]"
	token string
	end   int // where the last value ended
}

// value scans the value at i and reports whether it holds a non-finite
// token; otherwise s.end is where it ends.
func (s *nfScan) value(i int) bool {
	b := s.b
	switch c := b[i]; {
	case c == '{':
		i = skipWS(b, i+1)
		for b[i] != '}' {
			if b[i] == ',' {
				i = skipWS(b, i+1)
			}
			ke := skipString(b, i)
			var key string
			_ = json.Unmarshal(b[i:ke], &key)
			i = skipWS(b, skipWS(b, ke)+1)
			s.path = append(s.path, keySegment(key))
			if s.value(i) {
				return true
			}
			s.path = s.path[:len(s.path)-1]
			i = skipWS(b, s.end)
		}
		s.end = i + 1
	case c == '[':
		i = skipWS(b, i+1)
		for n := 0; b[i] != ']'; n++ {
			if b[i] == ',' {
				i = skipWS(b, i+1)
			}
			s.path = append(s.path, "["+strconv.Itoa(n)+"]")
			if s.value(i) {
				return true
			}
			s.path = s.path[:len(s.path)-1]
			i = skipWS(b, s.end)
		}
		s.end = i + 1
	case c == '"':
		s.end = skipString(b, i)
	case c == 'N':
		s.token = "NaN"
		return true
	case c == 'I':
		s.token = "Infinity"
		return true
	case c == '-' && i+1 < len(b) && b[i+1] == 'I':
		s.token = "-Infinity"
		return true
	default: // a number, true, false or null
		for i < len(b) && !strings.ContainsRune(",]} \t\r\n", rune(b[i])) {
			i++
		}
		s.end = i
	}
	return false
}

func (s *nfScan) pathString() string {
	p := strings.TrimPrefix(strings.Join(s.path, ""), ".")
	if p == "" {
		return "the top"
	}
	return p
}

// keySegment is ".key" for a key of letters, digits and underscores, and
// `["key"]` otherwise.
func keySegment(key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + key
	}
	q, _ := json.Marshal(key)
	return "[" + string(q) + "]"
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string whose quote is at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index after the valid JSON value at i.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			i = skipString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}
