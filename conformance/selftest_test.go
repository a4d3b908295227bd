package conformance_test

import (
	"context"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
)

// brokenHarness serves memory sessions through a wrapper with one defect,
// to prove the suite notices it.
type brokenHarness struct {
	store    *memory.Store
	wrap     func(*memory.Session) session.Session
	declared session.Capabilities
}

func (h brokenHarness) Name() string { return "broken" }
func (h brokenHarness) Open(_ context.Context, id string) (session.Session, error) {
	s, err := h.store.Session(id)
	if err != nil {
		return nil, err
	}
	return h.wrap(s), nil
}
func (h brokenHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h brokenHarness) Declared() session.Capabilities { return h.declared }

type plain struct{ session.Session }

// latestReplace exposes exactly the two standard capabilities.
type latestReplace struct {
	plain
	m *memory.Session
}

func (l latestReplace) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	return l.m.LatestItems(ctx, n)
}
func (l latestReplace) ReplaceItems(ctx context.Context, items []session.Item) error {
	return l.m.ReplaceItems(ctx, items)
}

// oldestFirst answers latest-N with the oldest N, a bug peers have shipped.
type oldestFirst struct{ *memory.Session }

func (o oldestFirst) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	all, err := o.Items(ctx)
	if err != nil || n >= len(all) {
		return all, err
	}
	return all[:n], nil
}

// dropsLast loses the last item of every batch.
type dropsLast struct{ plain }

func (d dropsLast) AddItems(ctx context.Context, items []session.Item) error {
	if len(items) > 1 {
		items = items[:len(items)-1]
	}
	return d.plain.AddItems(ctx, items)
}

// ignoresCancel writes even when the context is already cancelled.
type ignoresCancel struct{ plain }

func (i ignoresCancel) AddItems(_ context.Context, items []session.Item) error {
	return i.plain.AddItems(context.Background(), items)
}

// perItem appends a batch one item at a time, so batches interleave.
type perItem struct{ plain }

func (p perItem) AddItems(ctx context.Context, items []session.Item) error {
	for _, it := range items {
		if err := p.plain.AddItems(ctx, []session.Item{it}); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// sharedNamespace maps every id with a ':' onto its prefix: a naive key
// layout.
func sharedNamespace(st *memory.Store) func(*memory.Session) session.Session {
	return func(s *memory.Session) session.Session {
		id := s.SessionID()
		for i := len(id) - 1; i > 0; i-- {
			if id[i] == '*' {
				other, _ := st.Session(id[:i])
				return plain{other}
			}
		}
		return plain{s}
	}
}

func TestTheSuiteCatchesBrokenAdapters(t *testing.T) {
	st := memory.New(memory.Options{})
	tests := []struct {
		name     string
		h        brokenHarness
		mustFail []string
	}{
		{"latest returns the oldest", brokenHarness{st, func(s *memory.Session) session.Session { return oldestFirst{s} }, session.Caps(session.CapLatest)},
			[]string{"limit/native-table", "limit/native-matches-fallback"}},
		{"a batch loses its last item", brokenHarness{st, func(s *memory.Session) session.Session { return dropsLast{plain{s}} }, 0},
			[]string{"core/order", "core/round-trip", "concurrency/two-handles"}},
		{"cancellation ignored", brokenHarness{st, func(s *memory.Session) session.Session { return ignoresCancel{plain{s}} }, 0},
			[]string{"cancel/before-call"}},
		{"batches interleave", brokenHarness{st, func(s *memory.Session) session.Session { return perItem{plain{s}} }, 0},
			[]string{"concurrency/two-handles"}},
		{"declared but not implemented", brokenHarness{st, func(s *memory.Session) session.Session { return plain{s} }, session.Caps(session.CapReplace)},
			[]string{"capabilities/declared-implemented"}},
		{"implemented but not declared", brokenHarness{st, func(s *memory.Session) session.Session { return s }, session.Caps(session.CapLatest)},
			[]string{"capabilities/implemented-declared"}},
		{"ids leak into each other", brokenHarness{st, sharedNamespace(st), 0},
			[]string{"ids/hostile"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := conformance.Check(context.Background(), tc.h, conformance.Options{})
			var failed []string
			for _, c := range rep.Clauses {
				if c.Status == conformance.StatusFail {
					failed = append(failed, c.Name)
				}
			}
			for _, name := range tc.mustFail {
				require.True(t, slices.Contains(failed, name), "clause %s must fail; failed: %v", name, failed)
			}
			require.Equal(t, conformance.LevelNone, rep.Level, rep.Summary())
		})
	}
}

func TestCheckGradesTheReferenceAdapterFull(t *testing.T) {
	st := memory.New(memory.Options{})
	h := brokenHarness{st, func(s *memory.Session) session.Session { return latestReplace{plain{s}, s} }, session.Caps(session.CapLatest, session.CapReplace)}
	rep := conformance.Check(context.Background(), h, conformance.Options{})
	require.True(t, rep.OK(), rep.Summary())
	require.Equal(t, conformance.LevelFull, rep.Level)
	js, err := rep.JSON()
	require.NoError(t, err)
	require.Contains(t, string(js), `"level": "FULL"`)

	hidden := brokenHarness{st, func(s *memory.Session) session.Session { return plain{s} }, 0}
	rep = conformance.Check(context.Background(), hidden, conformance.Options{})
	require.True(t, rep.OK(), rep.Summary())
	require.Equal(t, conformance.LevelBase, rep.Level, "no capabilities: BASE")
}
