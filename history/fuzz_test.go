package history_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// genKind is one kind of item the fuzz histories are made of: its JSON for
// a call id, and what the checker needs to know of it.
type genKind struct {
	json     func(id string) string
	role     genRole
	family   string // the pairing family of a call or output ("" for none)
	owned    bool   // a shell call owned by the program of its id
	metadata bool   // carries the Python SDK's internal keys
	nan      bool   // holds a NaN
}

type genRole int

const (
	genOther     genRole = iota
	genBoundary          // a user, developer or system message
	genReasoning         // a reasoning item
	genCall              // a call that needs its output
	genOutput            // an output that needs its call
	genRequest           // an MCP approval request (may wait for a human)
	genProgram           // a program (kept while it owns kept items)
)

var genKinds = []genKind{
	{json: func(string) string { return `{"role":"user","content":"u"}` }, role: genBoundary},
	{json: func(string) string { return `{"type":"message","role":"developer","content":"d"}` }, role: genBoundary},
	{json: func(string) string { return `{"role":"system","content":"s"}` }, role: genBoundary},
	{json: func(id string) string { return `{"type":"reasoning","id":"rs_` + id + `","summary":[]}` }, role: genReasoning},
	{json: func(id string) string { return `{"type":"reasoning","id":"rs_` + id + `","encrypted_content":"gAAA"}` }, role: genReasoning},
	{json: func(id string) string {
		return `{"type":"message","id":"msg_` + id + `","role":"assistant","content":[{"type":"output_text","text":"a"}]}`
	}},
	{json: func(string) string { return `{"role":"assistant","content":"plain"}` }},
	{json: func(id string) string {
		return `{"type":"function_call","call_id":"` + id + `","name":"f","arguments":"{}"}`
	}, role: genCall, family: "function"},
	{json: func(id string) string { return `{"type":"function_call_output","call_id":"` + id + `","output":"1"}` }, role: genOutput, family: "function"},
	{json: func(id string) string {
		return `{"type":"function_call","call_id":"` + id + `","name":"f","arguments":"{}","_agents_tool_title":"T","_agents_tool_description":"D"}`
	}, role: genCall, family: "function", metadata: true},
	{json: func(id string) string {
		return `{"type":"local_shell_call","id":"lsc_` + id + `","call_id":"` + id + `","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}}`
	}, role: genCall, family: "local_shell"},
	{json: func(id string) string { return `{"type":"local_shell_call_output","id":"` + id + `","output":"x"}` }, role: genOutput, family: "local_shell"},
	{json: func(id string) string {
		return `{"type":"computer_call","id":"cu_` + id + `","call_id":"` + id + `","action":{"type":"screenshot"}}`
	}, role: genCall, family: "computer"},
	{json: func(id string) string {
		return `{"type":"computer_call_output","call_id":"` + id + `","output":{"type":"computer_screenshot"}}`
	}, role: genOutput, family: "computer"},
	{json: func(id string) string { return `{"type":"web_search_call","id":"ws_` + id + `","status":"completed"}` }},
	{json: func(id string) string {
		return `{"type":"mcp_approval_request","id":"` + id + `","name":"t","server_label":"s"}`
	}, role: genRequest, family: "mcp"},
	{json: func(id string) string {
		return `{"type":"mcp_approval_response","approval_request_id":"` + id + `","approve":true}`
	}, role: genOutput, family: "mcp"},
	{json: func(id string) string { return `{"type":"program","call_id":"p` + id + `"}` }, role: genProgram, family: "program"},
	{json: func(id string) string { return `{"type":"program_output","call_id":"p` + id + `"}` }, role: genOutput, family: "program"},
	{json: func(id string) string {
		return `{"type":"shell_call","call_id":"s` + id + `","caller":{"caller_id":"p` + id + `"}}`
	}, role: genCall, family: "shell", owned: true},
	{json: func(id string) string { return `{"type":"shell_call_output","call_id":"s` + id + `"}` }, role: genOutput, family: "shell"},
	{json: func(id string) string {
		return `{"type":"function_call_output","call_id":"` + id + `","output":{"score":NaN}}`
	}, role: genOutput, family: "function", nan: true},
}

// nk is the number of kinds: a byte b picks kind b%nk and id b/nk%3.
const nk = 22

var genIDs = []string{"a", "b", "c"}

// genItem is one generated item and what the checker knows of it.
type genItem struct {
	genKind
	id string
}

// genHistory turns fuzz bytes into a history: each byte picks a kind and a
// call id. Every item carries its position in "seq".
func genHistory(b []byte) ([]session.Item, []genItem) {
	if len(b) > 40 {
		b = b[:40]
	}
	items := make([]session.Item, len(b))
	gens := make([]genItem, len(b))
	for i, c := range b {
		k := genKinds[int(c)%nk]
		id := genIDs[int(c)/nk%len(genIDs)]
		js := k.json(id)
		js = js[:len(js)-1] + `,"seq":` + strconv.Itoa(i) + `}`
		items[i] = session.MustItem(js)
		gens[i] = genItem{k, id}
	}
	return items, gens
}

// checkWindow reports the first rule of the Responses API the model input
// got, of the newest n items of hist, breaks.
func checkWindow(hist []session.Item, gens []genItem, n int, got []session.Item) error {
	if len(got) > n {
		return fmt.Errorf("%d items for a window of %d", len(got), n)
	}
	in := make(map[int]bool, len(got))
	at := make([]int, len(got))
	last := -1
	for j, it := range got {
		raw, ok := it.Field("seq")
		if !ok {
			return fmt.Errorf("item %d has no seq: %s", j, it)
		}
		i, err := strconv.Atoi(string(raw))
		if err != nil || i <= last || i < len(hist)-n {
			return fmt.Errorf("item %d (seq %s) is not in order inside the window", j, raw)
		}
		last, in[i], at[j] = i, true, i
		if gens[i].metadata && (it.HasField(history.MetaToolTitle) || it.HasField(history.MetaToolDescription)) {
			return fmt.Errorf("item %d keeps the Python SDK's internal keys: %s", i, it)
		}
	}
	for _, i := range at {
		g := gens[i]
		switch g.role {
		case genReasoning:
			f := i + 1
			for f < len(hist) && gens[f].role == genReasoning {
				f++
			}
			if f == len(hist) || gens[f].role == genBoundary || !in[f] {
				return fmt.Errorf("reasoning item %d is sent without its following item", i)
			}
		case genBoundary:
		default:
			for o := i - 1; o >= 0 && gens[o].role != genBoundary; o-- {
				if gens[o].role == genReasoning {
					if !in[o] {
						return fmt.Errorf("item %d is sent without its reasoning item %d", i, o)
					}
					break
				}
			}
		}
		switch g.role {
		case genOutput:
			if !sent(gens, at, func(h genItem) bool {
				return h.family == g.family && h.id == g.id && (h.role == genCall || h.role == genRequest || h.role == genProgram)
			}) {
				return fmt.Errorf("output %d is sent without its call", i)
			}
		case genCall:
			if g.owned {
				continue // a pending hosted shell call inside a program
			}
			if !sent(gens, at, func(h genItem) bool { return h.family == g.family && h.id == g.id && h.role == genOutput }) {
				return fmt.Errorf("call %d is sent without its output", i)
			}
		case genProgram:
			if !sent(gens, at, func(h genItem) bool {
				return h.family == g.family && h.id == g.id && h.role == genOutput || h.owned && h.id == g.id
			}) {
				return fmt.Errorf("program %d is sent without its output or anything it owns", i)
			}
		}
	}
	return nil
}

// sent reports whether an item of the window at satisfies ok.
func sent(gens []genItem, at []int, ok func(genItem) bool) bool {
	for _, i := range at {
		if ok(gens[i]) {
			return true
		}
	}
	return false
}

// FuzzModelInput: for a random history and every window size, the model
// input never holds a reasoning item without its following item, never an
// item whose reasoning item was cut, never an orphan call or output, and
// never the Python SDK's internal keys; read from a session it is the
// window of the history in memory.
func FuzzModelInput(f *testing.F) {
	if len(genKinds) != nk {
		f.Fatalf("%d kinds, nk is %d", len(genKinds), nk)
	}
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hist, gens := genHistory(b)
		ctx := context.Background()
		s, err := memory.NewSession("s")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddItems(ctx, hist); err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= len(hist)+1; n++ {
			checkSizes(t, ctx, s, hist, gens, n)
		}
		checkSizes(t, ctx, s, hist, gens, math.MaxInt)
	})
}

func checkSizes(t *testing.T, ctx context.Context, s session.Session, hist []session.Item, gens []genItem, n int) {
	t.Helper()
	got, err := history.ModelInput(ctx, s, n)
	win, werr := history.Window(hist, n)
	if fmt.Sprint(got, err) != fmt.Sprint(win, werr) {
		t.Fatalf("window of %d over %v: ModelInput gives %v, %v; Window gives %v, %v", n, hist, got, err, win, werr)
	}
	if err != nil {
		var nf *history.NonFiniteError
		if !errors.As(err, &nf) || nf.FromNewest < 1 || nf.FromNewest > min(n, len(hist)) || !gens[len(hist)-nf.FromNewest].nan {
			t.Fatalf("window of %d over %v: %v", n, hist, err)
		}
		return
	}
	if err := checkWindow(hist, gens, n, got); err != nil {
		t.Fatalf("window of %d over %v: %v\ngot %v", n, hist, err, got)
	}
}

// fuzzSeeds are histories that cover each rule; the same seeds are
// checked in under testdata/fuzz/FuzzModelInput. Kinds are numbered as in
// genKinds, plus nk for call id b.
var fuzzSeeds = [][]byte{
	// The history: user, rs_1, msg_1, user, rs_2, fc_1, its output.
	{0, 3, 5, 0, 3, 7, 8},
	// A reasoning item whose call never got an output, then a call that
	// did, then a message of the same response.
	{0, 3, 7, 7 + nk, 8 + nk, 5},
	// A trailing reasoning item, and one followed by a developer message.
	{0, 4, 1, 3},
	// The API schema's local shell output, named by id, a computer call,
	// a hosted web search, a system message.
	{0, 3, 10, 11, 12, 13, 5, 2, 3, 14, 5},
	// MCP approvals, a program owning a shell call, metadata keys.
	{0, 3, 15, 16, 17, 19, 20, 18, 6, 0, 9, 8, 3, 9 + nk, 8 + nk},
	// A NaN in an output, before and inside the window.
	{0, 7, 21, 0, 3, 7 + nk, 8 + nk, 5},
	// Two reasoning items in a row, the second's call unanswered.
	{0, 3, 4, 7, 8, 3, 4, 7 + nk, 6},
}

// TestFuzzCheckerCatchesOldWindows: the checker is not vacuous. The window
// as ModelInput made it before reasoning pairing (the Python SDK's prune
// plus orphan outputs) breaks a rule on every seed, and SafeWindow, which
// cannot look before the window, on all but the one whose rules hold
// inside the window.
func TestFuzzCheckerCatchesOldWindows(t *testing.T) {
	caught := func(window func([]session.Item) []session.Item) int {
		n := 0
		for _, seed := range fuzzSeeds {
			hist, gens := genHistory(seed)
			for size := 1; size <= len(hist); size++ {
				if checkWindow(hist, gens, size, window(hist[len(hist)-size:])) != nil {
					n++
					break
				}
			}
		}
		return n
	}
	old := func(w []session.Item) []session.Item {
		return keepFlagged(w, history.PruneOrphans(w, history.PruneOptions{DropOrphanOutputs: true}))
	}
	if got := caught(old); got != len(fuzzSeeds) {
		t.Errorf("the old window is caught on %d seeds", got)
	}
	if got := caught(history.SafeWindow); got != len(fuzzSeeds)-1 {
		t.Errorf("SafeWindow is caught on %d seeds", got)
	}
}
