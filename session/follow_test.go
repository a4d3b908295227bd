package session_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// readSince calls session.ReadSince or fails the test.
func readSince(t *testing.T, s session.Session, c session.Cursor) ([]session.Item, session.Cursor) {
	t.Helper()
	items, next, err := session.ReadSince(context.Background(), s, c)
	require.NoError(t, err)
	return items, next
}

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func tagged(tag string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(`{"tag":"` + tag + `","n":` + string(rune('0'+i)) + `}`)
	}
	return out
}

func TestReadSinceFallbackReadsWhatIsNew(t *testing.T) {
	ctx := context.Background()
	s := core{newMem(t)}
	got, c0 := readSince(t, s, "")
	require.Empty(t, got)
	require.Equal(t, session.Cursor(""), c0, "nothing new: the same cursor")

	require.NoError(t, s.AddItems(ctx, tagged("a", 3)))
	got, c1 := readSince(t, s, c0)
	require.Equal(t, texts(tagged("a", 3)), texts(got))
	again, same := readSince(t, s, c1)
	require.Empty(t, again)
	require.Equal(t, c1, same)

	require.NoError(t, s.AddItems(ctx, tagged("b", 2)))
	got, c2 := readSince(t, s, c1)
	require.Equal(t, texts(tagged("b", 2)), texts(got))

	// A pop of an item the reader never saw is not reported.
	require.NoError(t, s.AddItems(ctx, tagged("x", 2)))
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	got, c3 := readSince(t, s, c2)
	require.Equal(t, texts(tagged("x", 1)), texts(got))

	// A cursor over another history is lost, never read past.
	other := core{newMem(t)}
	require.NoError(t, other.AddItems(ctx, tagged("o", 1)))
	_, _, err = session.ReadSince(ctx, other, c3)
	require.ErrorIs(t, err, session.ErrCursorLost)
}

func TestReadSinceFallbackReportsRewrites(t *testing.T) {
	ctx := context.Background()
	pop := func(s session.Session) {
		t.Helper()
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for _, tc := range []struct {
		name    string
		rewrite func(s session.Session)
	}{
		{"a pop of the last item read", func(s session.Session) { pop(s) }},
		{"a pop of the last item read, then an append", func(s session.Session) {
			pop(s)
			require.NoError(t, s.AddItems(ctx, tagged("new", 1)))
		}},
		{"a pop below the cursor", func(s session.Session) {
			require.NoError(t, s.AddItems(ctx, tagged("unseen", 1)))
			pop(s)
			pop(s)
			pop(s)
			require.NoError(t, s.AddItems(ctx, tagged("new", 3)))
		}},
		{"a clear", func(s session.Session) { require.NoError(t, s.Clear(ctx)) }},
		{"a clear, then more items than the cursor covers", func(s session.Session) {
			require.NoError(t, s.Clear(ctx))
			require.NoError(t, s.AddItems(ctx, tagged("new", 5)))
		}},
		{"a replace", func(s session.Session) { require.NoError(t, session.Replace(ctx, s, tagged("r", 3))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := core{newMem(t)}
			require.NoError(t, s.AddItems(ctx, tagged("a", 3)))
			_, c, err := session.ReadSince(ctx, s, "")
			require.NoError(t, err)
			tc.rewrite(s)
			got, next, err := session.ReadSince(ctx, s, c)
			require.ErrorIs(t, err, session.ErrCursorLost)
			require.Empty(t, got)
			require.Equal(t, c, next)
			all, _, err := session.ReadSince(ctx, s, "")
			require.NoError(t, err, "the zero cursor reads the history again")
			want, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(want), texts(all))
		})
	}
}

func TestReadSinceFallbackRejectsInvalidCursors(t *testing.T) {
	ctx := context.Background()
	s := core{newMem(t)}
	require.NoError(t, s.AddItems(ctx, tagged("a", 2)))
	_, c, err := session.ReadSince(ctx, s, "")
	require.NoError(t, err)
	for _, bad := range []session.Cursor{"not a cursor", "h1:", "h1:2", "h1:-1:" + session.Cursor(make([]byte, 32)), c + "0", c[:len(c)-1], "x" + c} {
		got, _, err := session.ReadSince(ctx, s, bad)
		require.ErrorIs(t, err, session.ErrInvalidCursor, "%q", bad)
		require.Empty(t, got)
	}
}

func TestAppendOnceNeedsTheCapability(t *testing.T) {
	ctx := context.Background()
	m := newMem(t)
	s := core{m}
	appended, err := session.AppendOnce(ctx, s, "op-1", tagged("a", 1))
	require.ErrorIs(t, err, session.ErrUnsupported)
	require.False(t, appended)
	got, err := m.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "nothing is appended without the capability")
	require.False(t, session.Probe(s).Has(session.CapAppendOnce))
}

func TestAppendOnceChecksItsArgumentsFirst(t *testing.T) {
	ctx := context.Background()
	s := core{newMem(t)}
	_, err := session.AppendOnce(ctx, s, "", tagged("a", 1))
	require.ErrorIs(t, err, session.ErrInvalidOperationID)
	_, err = session.AppendOnce(ctx, s, "op-1", []session.Item{{}})
	require.ErrorIs(t, err, session.ErrInvalidItem)
}
