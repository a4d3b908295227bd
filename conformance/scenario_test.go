package conformance_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
)

// memHarness serves sessions of one memory store, wrapped by wrap.
type memHarness struct {
	store *memory.Store
	wrap  func(*memory.Session) session.Session
}

func (h memHarness) Name() string { return "memory (run-state)" }
func (h memHarness) Open(_ context.Context, id string) (session.Session, error) {
	s, err := h.store.Session(id)
	if err != nil {
		return nil, err
	}
	if h.wrap == nil {
		return s, nil
	}
	return h.wrap(s), nil
}
func (h memHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h memHarness) Declared() session.Capabilities {
	if h.wrap != nil {
		return 0
	}
	return session.Caps(session.CapLatest, session.CapReplace, session.CapTTL)
}

var runStateClauses = regexp.MustCompile(`^runstate/`)

func TestRunStateScenarios(t *testing.T) {
	h := memHarness{store: memory.New(memory.Options{})}
	rep := conformance.Run(t, h, conformance.Options{Run: runStateClauses})
	if rep.Failed > 0 {
		t.Errorf("run-state clauses failed: %s", rep.Summary())
	}
}
