package conformance

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/session"
)

// memoryHarness serves plain memory sessions.
type memoryHarness struct{ store *memory.Store }

func (h memoryHarness) Name() string { return "memory" }
func (h memoryHarness) Open(_ context.Context, id string) (session.Session, error) {
	return h.store.Session(id)
}
func (h memoryHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h memoryHarness) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapReplace, session.CapTTL)
}

func failedClauses(rep *Report) []string {
	var out []string
	for _, c := range rep.Clauses {
		if c.Status == StatusFail {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestScenariosCatchLoopMisuse proves the scenarios assert what they claim:
// an agent loop that misuses the runstate API fails specific clauses.
func TestScenariosCatchLoopMisuse(t *testing.T) {
	tests := []struct {
		misuse   string
		mustFail []string
	}{
		{"skip-entry-resume", []string{
			"runstate/resumed-append-recovered/fail-before-commit/live",
			"runstate/resumed-append-recovered/fail-before-commit/json",
			"runstate/held-other-session-refused/json",
			"runstate/fault-matrix/ordinary/live",
			"runstate/fault-matrix/held-entry/json",
		}},
		{"drop-held", []string{
			"runstate/deferred-park-run-again/live",
			"runstate/deferred-park-run-again/json",
			"runstate/partial-approval-one-batch/json",
			"runstate/fault-matrix/held-exit/live",
		}},
		{"no-fold", []string{
			"runstate/after-turn-cancel-reattach/live",
			"runstate/detached-park-joins-held/json",
			"runstate/fault-matrix/held-entry/live",
		}},
		{"unregistered-exit", []string{
			"runstate/resumed-append-recovered/commit-then-lose-ack/json",
			"runstate/failed-held-settle-recovered/live",
			"runstate/fault-matrix/ordinary/json",
			"runstate/fault-matrix/held-exit/json",
		}},
	}
	h := memoryHarness{memory.New(memory.Options{})}
	for _, tc := range tests {
		t.Run(tc.misuse, func(t *testing.T) {
			loopMisuse = tc.misuse
			defer func() { loopMisuse = "" }()
			rep := Check(context.Background(), h, Options{Run: regexp.MustCompile(`^runstate/`)})
			failed := failedClauses(rep)
			for _, name := range tc.mustFail {
				require.True(t, slices.Contains(failed, name), "clause %s must fail; failed: %v", name, failed)
			}
		})
	}
}
