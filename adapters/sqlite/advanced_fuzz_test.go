package sqlite

import (
	"encoding/json"
	"testing"

	"github.com/agentsessions/sessions/session"
)

// FuzzClassify: the structure columns Go derives from a stored record
// (message type, user turn, tool name) are the class's, as pyClassify
// transcribes them, for every record whose role, type, name, namespace
// and server_label are strings or absent; any other record never panics
// and gets a message type.
func FuzzClassify(f *testing.F) {
	for _, s := range append(append(append([]string{}, advBatch1...), advBatch2...), advBatch3...) {
		f.Add(s)
	}
	for _, s := range []string{``, `[]`, `null`, `"user"`, `{"role": 1}`, `{"type": 0}`, `{"type": true}`, `{"type": [1]}`,
		`{"type": "mcp_call", "server_label": "", "name": ""}`, `{"name": null}`, `{"name": 5, "namespace": 5}`, `{"name": "", "namespace": "x"}`, `{"role": "user", "x": NaN}`, `{"type": "a", "type": "b"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c := classify([]byte(raw))
		if c.typ == "" {
			t.Fatalf("%q: empty message type", raw)
		}
		if _, err := session.NewItem([]byte(raw)); err != nil {
			if c != (classification{typ: "other"}) {
				t.Fatalf("%q is no JSON object, classified %+v", raw, c)
			}
			return
		}
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) != nil {
			return // NaN or Infinity: pyClassify's decoder cannot read it
		}
		for _, k := range []string{"role", "type", "name", "namespace", "server_label"} {
			if v, ok := m[k]; ok {
				if _, isStr := v.(string); !isStr {
					return // pyClassify covers string fields only
				}
			}
		}
		typ, user, tool := pyClassify(raw)
		var goTool any
		if c.hasTool {
			goTool = c.tool
		}
		if c.typ != typ || c.user != user || goTool != tool {
			t.Fatalf("%q: Go classifies (%q, %v, %v), the class (%q, %v, %v)", raw, c.typ, c.user, goTool, typ, user, tool)
		}
	})
}

// TestClassifyPythonValues: what json.loads reads and encoding/json does
// not (NaN), duplicate keys, and non-string values are classified as the
// class classifies them.
func TestClassifyPythonValues(t *testing.T) {
	for raw, want := range map[string]classification{
		`{"role": "user", "score": NaN}`:                          {typ: "user", user: true},
		`{"type": "a", "type": "b"}`:                              {typ: "b"},
		`{"type": 1.50}`:                                          {typ: "1.5"},
		`{"type": Infinity, "name": NaN}`:                         {typ: "inf", tool: "nan", hasTool: true},
		`{"type": true, "name": false, "namespace": 0}`:           {typ: "True", tool: "0.False", hasTool: true},
		`{"type": "", "name": "n", "namespace": "n"}`:             {typ: "other", tool: "n", hasTool: true},
		`{"type": "mcp_call", "server_label": "", "name": ""}`:    {typ: "mcp_call"},
		`{"type": "mcp_call", "server_label": null, "name": "x"}`: {typ: "mcp_call", tool: "x", hasTool: true},
		`{"type": "file_search_call", "name": "ignored"}`:         {typ: "file_search_call", tool: "file_search_call", hasTool: true},
		`{"type": [], "name": null}`:                              {typ: "other"},
		`[1]`:                                                     {typ: "other"},
	} {
		if got := classify([]byte(raw)); got != want {
			t.Errorf("%s: got %+v, want %+v", raw, got, want)
		}
	}
}
