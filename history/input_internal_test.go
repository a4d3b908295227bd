package history

import (
	"bytes"
	"testing"

	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
)

// hasTokenReference reports whether b holds a NaN, Infinity or -Infinity
// token outside its strings, by the plainest walk of the bytes.
func hasTokenReference(b []byte) bool {
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (bytes.HasPrefix(b[i:], nanToken) || bytes.HasPrefix(b[i:], infToken)):
			return true
		}
	}
	return false
}

var inputSeeds = []string{
	`{"type":"function_call_output","call_id":"a","output":{"score":NaN}}`,
	`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"NaN \" Infinity"}],"logprobs":[1,-Infinity]}`,
	`{"role":"user","content":"q","t":Infinity}`,
	`{"unknown":"x \\\" NaN","later":[NaN]}`,
	`{"output":"a","output":[Infinity]}`,
	`{ "type" : "function_call" , "_agents_tool_title" : "T", "call_id":"a" ,"_agents_tool_description":{"x":[1,{"y":"}"}]} }`,
	`{"_agents_tool_\u0074itle":"T","k\u00e9y":NaN,"":{"":Infinity}}`,
	`{"type":"reasoning","encrypted_content":"gAAAA","summary":[{"type":"summary_text","text":"NaN"}]}`,
	`{}`,
	`{"_agents_tool_title":1}`,
}

// FuzzItemForModel checks, for any item, that the search for non-finite
// tokens agrees with the plainest walk (and that its quick test never
// misses one), and that stripping the Python SDK's keys gives what
// Python's json.dumps of the item without them gives.
func FuzzItemForModel(f *testing.F) {
	for _, s := range inputSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		it, err := session.NewItem(b)
		if err != nil {
			return
		}
		b = it.Bytes()
		want := hasTokenReference(b)
		_, tok, got := nonFinite(b)
		if got != want {
			t.Fatalf("nonFinite(%s) = %v %q, the reference says %v", b, got, tok, want)
		}
		if want && !mayHoldNonFinite(it) {
			t.Fatalf("mayHoldNonFinite(%s) misses a token", b)
		}
		if !it.HasField(MetaToolDescription) && !it.HasField(MetaToolTitle) {
			return
		}
		stripped, err := withoutTopLevel(b, dropMeta)
		if err != nil {
			t.Fatalf("withoutTopLevel(%s): %v", b, err)
		}
		if stripped.HasField(MetaToolDescription) || stripped.HasField(MetaToolTitle) {
			t.Fatalf("withoutTopLevel(%s) = %s keeps a key", b, stripped)
		}
		w, werr := pyjson.Dumps(b, pyjson.Options{DropTopLevel: dropMeta})
		g, gerr := pyjson.Dumps(stripped.Bytes(), pyjson.Options{})
		if werr != nil || gerr != nil || !bytes.Equal(w, g) {
			t.Fatalf("withoutTopLevel(%s) = %s: Python reads %s (%v), want %s (%v)", b, stripped, g, gerr, w, werr)
		}
	})
}
