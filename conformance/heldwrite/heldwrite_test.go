package heldwrite_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/conformance/heldwrite"
	"github.com/agentsessions/sessions/conformance/suite"
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
	return session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapCheckpointCommit)
}

func TestHeldWriteScenarios(t *testing.T) {
	h := memHarness{store: memory.New(memory.Options{})}
	res := suite.Run(t, h, heldwrite.Clauses(), suite.Options{Namespace: suite.NewNamespace(suite.NewRunID(), "held-write")})
	require.Len(t, res, 144, "the held-write part has 144 clauses (48 in each mode: live, json, stored)")
	for _, r := range res {
		// A pass, or a clause go test's -run left out (a skip); never a
		// failure, never a skip for another reason.
		if r.Status != suite.StatusPass {
			require.Equal(t, suite.StatusSkip, r.Status, "%s: %s", r.Name, r.Message)
			require.Contains(t, r.Message, "filtered out by go test -run", r.Name)
		}
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
			[]string{"held-write/deferred-park-run-again/live", "held-write/deferred-park-run-again/json",
				"held-write/fault-matrix/held-exit/live", "held-write/fault-matrix/held-entry/json"}},
		{"a batch lands twice", func(s *memory.Session) session.Session { return writesTwice{plainSession{s}} },
			[]string{"held-write/one-ordered-write/live", "held-write/fault-matrix/held-exit/json",
				"held-write/partial-commit-fails-closed/live"}},
		{"reads lag one write behind", func(s *memory.Session) session.Session {
			p := lag[s.SessionID()]
			if p == nil {
				p = new([]session.Item)
				lag[s.SessionID()] = p
			}
			return laggingReads{plainSession{s}, p}
		}, []string{"held-write/resumed-append-recovered/commit-then-lose-ack/live",
			"held-write/fault-matrix/ordinary/live", "held-write/fault-matrix/held-exit/json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := suite.Check(context.Background(), memHarness{st, tc.wrap}, heldwrite.Clauses(), suite.Options{Namespace: suite.NewNamespace(suite.NewRunID(), "broken")})
			var failed []string
			for _, c := range rep {
				if c.Status == suite.StatusFail {
					failed = append(failed, c.Name)
				}
			}
			for _, name := range tc.mustFail {
				require.True(t, slices.Contains(failed, name), "clause %s must fail; failed: %v", name, failed)
			}
		})
	}
}
