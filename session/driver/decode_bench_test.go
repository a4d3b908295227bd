package driver_test

import (
	"strings"
	"testing"

	"github.com/agentsessions/sessions/session/driver"
)

// typicalRow is a stored function_call item of about 300 bytes.
var typicalRow = `{"type":"function_call","id":"fc_68a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5","call_id":"call_Zx9YwVuTsRqPoNmLkJiH",` +
	`"name":"get_weather","arguments":"{\"location\": \"Paris, France\", \"unit\": \"celsius\", \"days\": 3, \"detail\": \"hourly\"}",` +
	`"status":"completed","_agents_tool_title":"Weather lookup"}`

func BenchmarkDecodeStoredString(b *testing.B) {
	for _, c := range []struct{ name, row string }{
		{"300B", typicalRow},
		{"64KB", `{"type":"function_call_output","call_id":"call_1","output":"` + strings.Repeat("0123456789abcdef", 4096) + `"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.row)))
			for b.Loop() {
				if _, err := driver.DecodeStoredString(c.row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
