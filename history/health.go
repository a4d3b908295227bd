package history

import "github.com/agentsessions/sessions/session"

// ProblemKind names a defect of a stored history.
type ProblemKind string

// The defects Diagnose finds.
const (
	// ProblemOrphanOutput is an output with no earlier call of its mapped
	// type: the Responses API rejects every later request over such a
	// history ("No tool call found for function call output").
	ProblemOrphanOutput ProblemKind = "orphan-output"
	// ProblemDuplicateOutput is a second output for one call.
	ProblemDuplicateOutput ProblemKind = "duplicate-output"
	// ProblemUnansweredCall is a tool call with no later output. At the
	// very end of a history it may be a call awaiting approval.
	ProblemUnansweredCall ProblemKind = "unanswered-call"
)

// Severe reports whether the API rejects a history with this problem.
func (k ProblemKind) Severe() bool { return k != ProblemUnansweredCall }

// Problem is one defect at one position of a history.
type Problem struct {
	Index int         `json:"index"`
	Kind  ProblemKind `json:"kind"`
	Key   PairKey     `json:"key"`
}

// Diagnose walks a history oldest first and reports every output without
// an earlier call, every repeated output, and every call never answered.
// MCP approval requests without a response are not problems: they wait for
// a human.
func Diagnose(items []session.Item) []Problem {
	return diagnose(factsOf(items))
}

func diagnose(facts []facts) []Problem {
	var out []Problem
	called := map[PairKey]int{} // call key -> index of the call
	answered := map[PairKey]bool{}
	for i, f := range facts {
		if f.call {
			if f.hasID {
				called[f.key] = i
			}
			continue
		}
		if f.answers {
			switch {
			case !hasKey(called, f.key):
				out = append(out, Problem{i, ProblemOrphanOutput, f.key})
			case answered[f.key]:
				out = append(out, Problem{i, ProblemDuplicateOutput, f.key})
			default:
				answered[f.key] = true
			}
		}
	}
	for i, f := range facts {
		if f.call && f.hasID && f.key.Type != TypeMCPApprovalRequest && !answered[f.key] && called[f.key] == i {
			out = append(out, Problem{i, ProblemUnansweredCall, f.key})
		}
	}
	sortProblems(out)
	return out
}

func hasKey(m map[PairKey]int, k PairKey) bool { _, ok := m[k]; return ok }

func sortProblems(ps []Problem) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Index < ps[j-1].Index; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// RepairHistory returns items without the severe problems Diagnose finds
// (orphan and duplicate outputs) and, with dropUnanswered, without
// unanswered calls and the reasoning items right before them; it also
// returns the problems it removed.
func RepairHistory(items []session.Item, dropUnanswered bool) ([]session.Item, []Problem) {
	facts := factsOf(items)
	drop := make([]bool, len(items))
	var removed []Problem
	for _, p := range diagnose(facts) {
		if p.Kind.Severe() || dropUnanswered {
			drop[p.Index] = true
			removed = append(removed, p)
		}
	}
	keep := make([]bool, len(items))
	for i := range keep {
		keep[i] = !drop[i]
	}
	if dropUnanswered {
		dropReasoning(facts, keep, func(i int) bool { return drop[i] })
	}
	return kept(items, keep), removed
}
