package heldwrite

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/conformance/suite"
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

func failedClauses(rep []suite.Result) []string {
	var out []string
	for _, c := range rep {
		if c.Status == suite.StatusFail {
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
			"held-write/resumed-append-recovered/fail-before-commit/live",
			"held-write/resumed-append-recovered/fail-before-commit/json",
			"held-write/held-other-session-refused/json",
			"held-write/fault-matrix/ordinary/live",
			"held-write/fault-matrix/held-entry/json",
		}},
		{"drop-held", []string{
			"held-write/deferred-park-run-again/live",
			"held-write/deferred-park-run-again/json",
			"held-write/partial-approval-one-batch/json",
			"held-write/fault-matrix/held-exit/live",
		}},
		{"no-fold", []string{
			"held-write/after-turn-cancel-reattach/live",
			"held-write/detached-park-joins-held/json",
			"held-write/fault-matrix/held-entry/live",
		}},
		{"unregistered-exit", []string{
			"held-write/resumed-append-recovered/commit-then-lose-ack/json",
			"held-write/failed-held-settle-recovered/live",
			"held-write/fault-matrix/ordinary/json",
			"held-write/fault-matrix/held-exit/json",
		}},
	}
	h := memoryHarness{memory.New(memory.Options{})}
	for _, tc := range tests {
		t.Run(tc.misuse, func(t *testing.T) {
			loopMisuse = tc.misuse
			defer func() { loopMisuse = "" }()
			rep := suite.Check(context.Background(), h, Clauses(), suite.Options{Namespace: suite.NewNamespace(suite.NewRunID(), "misuse")})
			failed := failedClauses(rep)
			for _, name := range tc.mustFail {
				require.True(t, slices.Contains(failed, name), "clause %s must fail; failed: %v", name, failed)
			}
		})
	}
}
