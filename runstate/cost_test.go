package runstate_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agentsessions/sessions/runstate"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLoadCostIsBoundedByTheInput: hostile documents (one huge item, many
// small ones, deep nesting, long strings of escapes) cost Load memory
// within a small constant of their size; what is measured is logged.
func TestLoadCostIsBoundedByTheInput(t *testing.T) {
	base := fixture(t, "features/v1_19_held_pending_session_write.json")
	const bound = 192 // bytes allocated per input byte; measured ×22 to ×127
	for _, tc := range []struct {
		name string
		item string
	}{
		{"one 4 MiB item", `{"type":"message","role":"user","content":"` + strings.Repeat("x", 4<<20) + `"}`},
		{"escapes", `{"type":"message","role":"user","content":"` + strings.Repeat(`\u00e9\n`, 1<<18) + `"}`},
		{"deep nesting", `{"a":` + strings.Repeat(`[`, 9000) + strings.Repeat(`]`, 9000) + `}`},
		{"many members", `{` + strings.TrimSuffix(strings.Repeat(`"k":1,`, 1<<17), ",") + `}`},
	} {
		var items strings.Builder
		items.WriteString(tc.item)
		for i := 0; i < 3; i++ {
			fmt.Fprintf(&items, `,{"type":"function_call_output","call_id":"c%d","output":"x"}`, i)
		}
		doc := bytes.Replace(base, []byte(`"items": [`), []byte(`"items": [`+items.String()+`,`), 1)
		var err error
		n := allocated(func() { _, err = runstate.Load(doc) })
		ratio := float64(n) / float64(len(doc))
		t.Logf("%s: %d bytes in, %d allocated (×%.1f), err=%v", tc.name, len(doc), n, ratio, err)
		if ratio > bound {
			t.Errorf("%s: Load allocated ×%.1f its input, more than ×%d", tc.name, ratio, bound)
		}
	}
}
