package conformance_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

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

type plainSession struct{ session.Session }

// dropsFirst loses the first item of every batch of two or more: a
// settling call vanishes and its output is orphaned.
type dropsFirst struct{ plainSession }

func (d dropsFirst) AddItems(ctx context.Context, items []session.Item) error {
	if len(items) >= 2 {
		items = items[1:]
	}
	return d.plainSession.AddItems(ctx, items)
}

// writesTwice commits every batch of two or more twice (a retry that
// duplicates), so recovered batches appear twice.
type writesTwice struct{ plainSession }

func (d writesTwice) AddItems(ctx context.Context, items []session.Item) error {
	if err := d.plainSession.AddItems(ctx, items); err != nil || len(items) < 2 {
		return err
	}
	return d.plainSession.AddItems(ctx, items)
}

// laggingReads answers reads from a replica one write behind: the recovery
// tail read misses a committed append and writes it again.
type laggingReads struct {
	plainSession
	prev *[]session.Item
}

func (l laggingReads) Items(ctx context.Context) ([]session.Item, error) {
	if *l.prev != nil {
		return *l.prev, nil
	}
	return l.plainSession.Items(ctx)
}

func (l laggingReads) AddItems(ctx context.Context, items []session.Item) error {
	cur, err := l.plainSession.Items(ctx)
	if err != nil {
		return err
	}
	*l.prev = cur
	return l.plainSession.AddItems(ctx, items)
}

// TestRunStateScenariosCatchBrokenAdapters proves the run-state clauses
// fail on sessions that break the guarantees recovery relies on.
func TestRunStateScenariosCatchBrokenAdapters(t *testing.T) {
	st := memory.New(memory.Options{})
	lag := map[string]*[]session.Item{}
	tests := []struct {
		name     string
		wrap     func(*memory.Session) session.Session
		mustFail []string
	}{
		{"a batch loses its first item", func(s *memory.Session) session.Session { return dropsFirst{plainSession{s}} },
			[]string{"runstate/deferred-park-run-again/live", "runstate/deferred-park-run-again/json",
				"runstate/fault-matrix/held-exit/live", "runstate/fault-matrix/held-entry/json"}},
		{"a batch lands twice", func(s *memory.Session) session.Session { return writesTwice{plainSession{s}} },
			[]string{"runstate/one-ordered-write/live", "runstate/fault-matrix/held-exit/json",
				"runstate/partial-commit-fails-closed/live"}},
		{"reads lag one write behind", func(s *memory.Session) session.Session {
			p := lag[s.SessionID()]
			if p == nil {
				p = new([]session.Item)
				lag[s.SessionID()] = p
			}
			return laggingReads{plainSession{s}, p}
		}, []string{"runstate/resumed-append-recovered/commit-then-lose-ack/live",
			"runstate/fault-matrix/ordinary/live", "runstate/fault-matrix/held-exit/json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := conformance.Check(context.Background(), memHarness{st, tc.wrap}, conformance.Options{Run: runStateClauses})
			var failed []string
			for _, c := range rep.Clauses {
				if c.Status == conformance.StatusFail {
					failed = append(failed, c.Name)
				}
			}
			for _, name := range tc.mustFail {
				require.True(t, slices.Contains(failed, name), "clause %s must fail; failed: %v", name, failed)
			}
		})
	}
}
