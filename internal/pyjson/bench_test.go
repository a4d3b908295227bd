package pyjson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchItem is a typical assistant message item of a few hundred bytes.
const benchItem = `{"type":"message","id":"msg_0123456789abcdef","role":"assistant","status":"completed",` +
	`"content":[{"type":"output_text","annotations":[],"text":"Here is the plan: first read the file, then ` +
	`summarize it. Caf\u00e9 \u2603 — “quotes” and a tab\tand a newline\n.","logprobs":[]}],` +
	`"_agents_tool_title":"t","usage":{"input_tokens":1234,"output_tokens":56,"ratio":0.045380875202593194}}`

// benchConversation returns a JSON array of n items of mixed shapes.
func benchConversation(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		switch i % 3 {
		case 0:
			b.WriteString(benchItem)
		case 1:
			fmt.Fprintf(&b, `{"type":"function_call","call_id":"call_%d","name":"lookup","arguments":"{\"q\": \"item %d\", \"limit\": 10}","id":"fc_%d"}`, i, i, i)
		default:
			fmt.Fprintf(&b, `{"type":"function_call_output","call_id":"call_%d","output":"result %d: 3.14159 and ünïcödé"}`, i-1, i)
		}
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func BenchmarkDumps(b *testing.B) {
	digest := Options{SortKeys: true, EnsureASCII: true, DropTopLevel: []string{"_agents_tool_description", "_agents_tool_title"}}
	cases := []struct {
		name string
		raw  []byte
		opts Options
	}{
		{"item/digest", []byte(benchItem), digest},
		{"item/compact", []byte(benchItem), Options{EnsureASCII: true, Compact: true}},
		{"conversation1MB/digest", benchConversation(5000), digest},
		{"conversation1MB/unicode", benchConversation(5000), Options{}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Dumps(c.raw, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodingJSONBaseline decodes into interface{} and re-encodes with
// encoding/json (sorted keys, but not Python's format): a reference point.
func BenchmarkEncodingJSONBaseline(b *testing.B) {
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"item", []byte(benchItem)}, {"conversation1MB", benchConversation(5000)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.raw)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(c.raw, &v); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
