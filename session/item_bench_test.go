package session_test

import (
	"strings"
	"testing"

	"github.com/agentsessions/sessions/session"
)

// benchCall is a typical function_call item of about 300 bytes.
var benchCall = session.MustItem(`{"type":"function_call","id":"fc_68a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5","call_id":"call_Zx9YwVuTsRqPoNmLkJiH",` +
	`"name":"get_weather","arguments":"{\"location\": \"Paris, France\", \"unit\": \"celsius\", \"days\": 3, \"detail\": \"hourly\"}",` +
	`"status":"completed","_agents_tool_title":"Weather lookup"}`)

// benchLarge is a 64 KB function_call_output whose call_id follows the
// payload.
var benchLarge = session.MustItem(`{"type":"function_call_output","output":"` + strings.Repeat("0123456789abcdef", 4096) +
	`","call_id":"call_1","status":"completed"}`)

// accessors is what runstate.DedupeKey and history's pairing ask of an item.
func accessors(it session.Item) int {
	n := len(it.Type()) + len(it.CallID()) + len(it.ID()) + len(it.Role())
	if it.HasField("role") {
		n++
	}
	s, _ := it.StringField("approval_request_id")
	return n + len(s)
}

func BenchmarkItemAccessors(b *testing.B) {
	for _, c := range []struct {
		name string
		it   session.Item
	}{{"300B", benchCall}, {"64KB", benchLarge}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if accessors(c.it) == 0 {
					b.Fatal("no fields")
				}
			}
		})
	}
}

// BenchmarkItemFacts is what runstate reads of every item of a turn:
// Type, CallID and HasField("role"), separately and in one pass.
func BenchmarkItemFacts(b *testing.B) {
	it := session.MustItem(`{"type":"function_call","id":"fc_1_2","call_id":"call_1_2","name":"get_weather","arguments":"{\"location\": \"Paris\"}","status":"completed"}`)
	b.Run("separate", func(b *testing.B) {
		for b.Loop() {
			if it.Type() == "" || it.CallID() == "" || it.HasField("role") {
				b.Fatal("wrong fields")
			}
		}
	})
	b.Run("TypeCallRole", func(b *testing.B) {
		for b.Loop() {
			if typ, callID, role := it.TypeCallRole(); typ == "" || callID == "" || role {
				b.Fatal("wrong fields")
			}
		}
	})
}
