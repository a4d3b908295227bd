package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func item(t *testing.T, s string) []session.Item {
	t.Helper()
	it, err := session.ParseItems(s)
	require.NoError(t, err)
	return it
}

func TestOperationIDsGoWithTheSession(t *testing.T) {
	ctx := context.Background()
	st := New(Options{})
	s, err := st.Session("s")
	require.NoError(t, err)
	ok, err := s.AddItemsOnce(ctx, "op", item(t, `{"n":1}`))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Clear(ctx))
	ids, err := st.ListSessions(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "a cleared session holding only operation ids is not listed")
	ok, err = s.AddItemsOnce(ctx, "op", item(t, `{"n":1}`))
	require.NoError(t, err)
	require.False(t, ok, "the id outlives the clear")

	require.NoError(t, st.RemoveSession(ctx, "s"))
	ok, err = s.AddItemsOnce(ctx, "op", item(t, `{"n":1}`))
	require.NoError(t, err)
	require.True(t, ok, "removing the session removes its ids")
}

func TestOperationIDsExpireWithTheSession(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{}
	st := New(Options{TTL: 10, Now: clock.Now})
	s, err := st.Session("s")
	require.NoError(t, err)
	ok, err := s.AddItemsOnce(ctx, "op", nil)
	require.NoError(t, err)
	require.True(t, ok)
	clock.Advance(10)
	ok, err = s.AddItemsOnce(ctx, "op", nil)
	require.NoError(t, err)
	require.True(t, ok, "an expired session's ids are gone with it")
}

func TestCursorsSkipCorruptRecords(t *testing.T) {
	ctx := context.Background()
	s, err := NewSession("s")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, item(t, `{"n":1}`)))
	s.appendRaw([]byte("not json"))
	got, c, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	require.Len(t, got, 1)
	// The cursor names the readable item, not the corrupt record after
	// it, which a pop walks past: the pop of the item read is reported.
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = s.ItemsSince(ctx, c)
	require.ErrorIs(t, err, session.ErrCursorLost)
}

func TestCursorsOfAnotherSessionAreLost(t *testing.T) {
	ctx := context.Background()
	st := New(Options{})
	a, _ := st.Session("a")
	b, _ := st.Session("b")
	require.NoError(t, a.AddItems(ctx, item(t, `{"n":1}`)))
	require.NoError(t, b.AddItems(ctx, item(t, `{"n":2}`)))
	_, c, err := a.ItemsSince(ctx, "")
	require.NoError(t, err)
	_, _, err = b.ItemsSince(ctx, c)
	require.ErrorIs(t, err, session.ErrCursorLost)
	for _, bad := range []session.Cursor{"m0", "m01", "m-1", "m", "1", "m1x"} {
		_, _, err = a.ItemsSince(ctx, bad)
		require.ErrorIs(t, err, session.ErrInvalidCursor, "%q", bad)
	}
}
