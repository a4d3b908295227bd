package session_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/session"
)

// spy records the run context each call saw.
type spy struct {
	session.Session
	aware bool
	seen  []any
}

func (s *spy) AcceptsRunContext() bool { return s.aware }
func (s *spy) note(ctx context.Context) {
	rc, _ := session.RunContext(ctx)
	s.seen = append(s.seen, rc)
}
func (s *spy) Items(ctx context.Context) ([]session.Item, error) {
	s.note(ctx)
	return s.Session.Items(ctx)
}
func (s *spy) AddItems(ctx context.Context, items []session.Item) error {
	s.note(ctx)
	return s.Session.AddItems(ctx, items)
}
func (s *spy) PopItem(ctx context.Context) (session.Item, bool, error) {
	s.note(ctx)
	return s.Session.PopItem(ctx)
}
func (s *spy) Clear(ctx context.Context) error {
	s.note(ctx)
	return s.Session.Clear(ctx)
}

// core hides every optional capability.
type core struct{ session.Session }

func newMem(t *testing.T) *memory.Session {
	t.Helper()
	s, err := memory.NewSession("s")
	require.NoError(t, err)
	return s
}

func numbered(n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(`{"n":` + string(rune('0'+i)) + `}`)
	}
	return out
}

func TestRunContextReachesEveryCallOrNone(t *testing.T) {
	for _, aware := range []bool{true, false} {
		s := &spy{Session: core{newMem(t)}, aware: aware}
		ctx := session.WithRunContext(context.Background(), "wrapper")
		require.NoError(t, session.Append(ctx, s, numbered(3)))
		_, err := session.All(ctx, s)
		require.NoError(t, err)
		_, err = session.Latest(ctx, s, 2)
		require.NoError(t, err)
		_, _, err = session.Pop(ctx, s)
		require.NoError(t, err)
		require.NoError(t, session.Replace(ctx, s, numbered(1)))
		require.NoError(t, session.Clear(ctx, s))
		require.Len(t, s.seen, 8) // Replace's fallback reads, clears and appends
		for i, rc := range s.seen {
			if aware {
				assert.Equal(t, "wrapper", rc, "call %d of an aware session gets the run context", i)
			} else {
				assert.Nil(t, rc, "call %d of a legacy session never sees the run context", i)
			}
		}
		assert.Equal(t, aware, session.Probe(s).Has(session.CapRunContext))
	}
}

func TestLatestFallbackTable(t *testing.T) {
	ctx := context.Background()
	m := newMem(t)
	items := numbered(5)
	require.NoError(t, m.AddItems(ctx, items))
	for _, s := range []session.Session{m, core{m}} {
		for n, want := range map[int][]session.Item{0: {}, 1: items[4:], 5: items, 6: items} {
			got, err := session.Latest(ctx, s, n)
			require.NoError(t, err)
			require.Len(t, got, len(want))
			for i := range want {
				require.True(t, want[i].Equal(got[i]))
			}
		}
		_, err := session.Latest(ctx, s, -1)
		require.ErrorIs(t, err, session.ErrInvalidLimit)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := session.Latest(cctx, m, 0)
	require.ErrorIs(t, err, context.Canceled, "n == 0 still honours cancellation")
}

// failingAdd fails its next `fail` appends, then appends normally.
type failingAdd struct {
	session.Session
	fail int
}

func (f *failingAdd) AddItems(ctx context.Context, items []session.Item) error {
	if f.fail > 0 {
		f.fail--
		return errors.New("boom")
	}
	return f.Session.AddItems(ctx, items)
}

func TestReplaceFallbackRestoresOnFailure(t *testing.T) {
	ctx := context.Background()
	m := newMem(t)
	require.NoError(t, m.AddItems(ctx, numbered(3)))
	f := &failingAdd{Session: core{m}, fail: 1}
	err := session.Replace(ctx, f, numbered(1))
	require.Error(t, err)
	assert.NotErrorIs(t, err, session.ErrReplaceRestore)
	got, err := m.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 3, "the previous history is restored")
}

func TestReplaceFallbackReportsAFailedRestore(t *testing.T) {
	ctx := context.Background()
	m := newMem(t)
	require.NoError(t, m.AddItems(ctx, numbered(3)))
	f := &failingAdd{Session: core{m}, fail: 2}
	err := session.Replace(ctx, f, numbered(1))
	require.ErrorIs(t, err, session.ErrReplaceRestore)
}

func TestReplaceRejectsInvalidItemsFirst(t *testing.T) {
	ctx := context.Background()
	m := newMem(t)
	require.NoError(t, m.AddItems(ctx, numbered(2)))
	err := session.Replace(ctx, core{m}, []session.Item{{}})
	require.ErrorIs(t, err, session.ErrInvalidItem)
	got, _ := m.Items(ctx)
	require.Len(t, got, 2)
}
