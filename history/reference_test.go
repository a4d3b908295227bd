package history

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/agentsessions/sessions/session"
)

// The implementations before items were read once (commit 4349efe), kept
// as the reference the single-pass ones must agree with.

func pruneReference(items []session.Item, opts PruneOptions) []bool {
	keep := make([]bool, len(items))
	outputs := make(map[PairKey]bool)
	calls := make(map[PairKey]bool)
	anonOutputs := 0
	for _, it := range items {
		if k, ok := AnsweredKey(it); ok {
			outputs[k] = true
		} else if it.Type() == "tool_search_output" {
			anonOutputs++
		}
		if k, ok := CallKey(it); ok {
			calls[k] = true
		}
	}
	owner := make([]string, len(items))
	var programs []int
	for i, it := range items {
		keep[i] = true
		owner[i] = callerIDReference(it)
		eligible := opts.CallEligible == nil || opts.CallEligible(i)
		t := it.Type()
		if _, isCall := callOutputTypes[t]; isCall && eligible {
			k, hasID := CallKey(it)
			switch {
			case hasID && outputs[k]:
			case t == "tool_search_call" && !hasID && anonOutputs > 0:
				anonOutputs-- // matched positionally
			case t == "program":
				programs = append(programs, i) // decided below
			case t == "shell_call" && owner[i] != "":
				// a pending hosted shell call inside a program
			default:
				keep[i] = false
			}
		}
		if opts.DropOrphanOutputs {
			if k, ok := AnsweredKey(it); ok && !calls[k] {
				keep[i] = false
			}
		}
	}
	for _, p := range programs {
		id := items[p].CallID()
		active := false
		for j := range items {
			if j != p && keep[j] && id != "" && owner[j] == id {
				active = true
				break
			}
		}
		if active {
			continue
		}
		keep[p] = false
		for j := range items {
			if id != "" && owner[j] == id {
				keep[j] = false
			}
		}
	}
	// A reasoning item goes with the dropped item that follows it.
	nextDropped := false
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type() == TypeReasoning {
			if nextDropped {
				keep[i] = false
			}
			continue
		}
		nextDropped = !keep[i]
	}
	return keep
}

func diagnoseReference(items []session.Item) []Problem {
	var out []Problem
	called := map[PairKey]int{} // call key -> index of the call
	answered := map[PairKey]bool{}
	for i, it := range items {
		if k, ok := CallKey(it); ok {
			called[k] = i
			continue
		}
		if k, ok := AnsweredKey(it); ok {
			switch {
			case !hasKey(called, k):
				out = append(out, Problem{i, ProblemOrphanOutput, k})
			case answered[k]:
				out = append(out, Problem{i, ProblemDuplicateOutput, k})
			default:
				answered[k] = true
			}
		}
	}
	for i, it := range items {
		if k, ok := CallKey(it); ok && k.Type != TypeMCPApprovalRequest && !answered[k] && called[k] == i {
			out = append(out, Problem{i, ProblemUnansweredCall, k})
		}
	}
	sortProblems(out)
	return out
}

func repairReference(items []session.Item, dropUnanswered bool) ([]session.Item, []Problem) {
	drop := make([]bool, len(items))
	var removed []Problem
	for _, p := range diagnoseReference(items) {
		if p.Kind.Severe() || dropUnanswered {
			drop[p.Index] = true
			removed = append(removed, p)
		}
	}
	keep := make([]bool, len(items))
	next := false
	for i := len(items) - 1; i >= 0; i-- {
		keep[i] = !drop[i]
		if items[i].Type() == TypeReasoning {
			if next && dropUnanswered {
				keep[i] = false
			}
			continue
		}
		next = drop[i]
	}
	return kept(items, keep), removed
}
func callerIDReference(it session.Item) string {
	raw, ok := it.Field("caller")
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var c struct {
		CallerID *string `json:"caller_id"`
	}
	if json.Unmarshal(raw, &c) != nil || c.CallerID == nil {
		return ""
	}
	return *c.CallerID
}

// randomHistory builds a history from a small alphabet of calls, outputs,
// programs, owned items, reasoning items and messages, so that keys
// collide often.
func randomHistory(r *rand.Rand, n int) []session.Item {
	types := []string{"function_call", "function_call_output", "program", "program_output", "shell_call",
		"shell_call_output", "tool_search_call", "tool_search_output", "mcp_approval_request",
		"mcp_approval_response", "reasoning", "message", "custom_tool_call_output"}
	ids := []string{"", "a", "b", "c"}
	items := make([]session.Item, n)
	for i := range items {
		typ := types[r.IntN(len(types))]
		m := map[string]any{"type": typ}
		if id := ids[r.IntN(len(ids))]; id != "" {
			switch typ {
			case "mcp_approval_request", "reasoning", "message":
				m["id"] = id
			case "mcp_approval_response":
				m["approval_request_id"] = id
			default:
				m["call_id"] = id
			}
		}
		if r.IntN(4) == 0 {
			m["caller"] = map[string]any{"caller_id": ids[r.IntN(len(ids))]}
		}
		b, _ := json.Marshal(m)
		items[i] = session.MustItem(string(b))
	}
	return items
}

func TestSinglePassMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 3000 {
		items := randomHistory(r, r.IntN(14))
		for _, opts := range []PruneOptions{{}, {DropOrphanOutputs: true}, {CallEligible: func(i int) bool { return i%2 == 0 }}} {
			if got, want := PruneOrphans(items, opts), pruneReference(items, opts); !slices.Equal(got, want) {
				t.Fatalf("round %d: PruneOrphans(%v) = %v, want %v", round, items, got, want)
			}
		}
		if got, want := Diagnose(items), diagnoseReference(items); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: Diagnose(%v) = %v, want %v", round, items, got, want)
		}
		for _, du := range []bool{false, true} {
			got, gp := RepairHistory(items, du)
			want, wp := repairReference(items, du)
			if fmt.Sprint(got, gp) != fmt.Sprint(want, wp) {
				t.Fatalf("round %d: RepairHistory(%v, %v) = %v, want %v", round, items, du, got, want)
			}
		}
	}
}
