package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// TestReplaceIfBesideAppend: a version read, then an append through
// another Store (and one by Python's statements, and a Python pop), then
// ReplaceItemsIf with the old version: session.ErrHistoryChanged, and
// nothing lost. With the version read again it replaces.
func TestReplaceIfBesideAppend(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	c := connect(t)
	pyCreateTables(t, c, schema)
	a := openStore(t, Options{Schema: schema})
	b := openStore(t, Options{Schema: schema})
	s, err := a.Session("versioned")
	require.NoError(t, err)
	require.True(t, session.Probe(s).Has(session.CapVersionedReplace))
	peer, _ := b.Session("versioned")
	py := &pySession{t: t, c: c, schema: schema, id: "versioned"}

	require.NoError(t, s.AddItems(ctx, numbered("a", 0, 3)))
	want := strs(numbered("a", 0, 3))
	for _, change := range []struct {
		name string
		do   func()
	}{
		{"a peer's append", func() {
			require.NoError(t, peer.AddItems(ctx, numbered("b", 0, 2)))
			want = append(want, strs(numbered("b", 0, 2))...)
		}},
		{"a Python append", func() {
			py.addItems(`{"py":1}`)
			want = append(want, `{"py":1}`)
		}},
		{"a Python pop", func() {
			_, ok := py.popItem()
			require.True(t, ok)
			want = want[:len(want)-1]
		}},
		{"an update in place", func() {
			_, err := c.Exec(ctx, `UPDATE agent_messages SET message_data = message_data WHERE id = (SELECT min(id) FROM agent_messages)`)
			require.NoError(t, err)
		}},
	} {
		v, err := s.HistoryVersion(ctx)
		require.NoError(t, err)
		change.do()
		err = s.ReplaceItemsIf(ctx, v, numbered("x", 0, 1))
		require.ErrorIs(t, err, session.ErrHistoryChanged, "after %s", change.name)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, want, strs(got), "after %s: nothing lost, nothing written", change.name)
	}
	v, err := s.HistoryVersion(ctx)
	require.NoError(t, err)
	again, err := peer.HistoryVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, v, again, "two Stores read one version")
	require.NoError(t, s.ReplaceItemsIf(ctx, v, numbered("x", 0, 2)))
	got, err := peer.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, strs(numbered("x", 0, 2)), strs(got))
	require.Equal(t, strs(numbered("x", 0, 2)), py.getItems(-1))

	v, err = s.HistoryVersion(ctx)
	require.NoError(t, err)
	require.NoError(t, s.ReplaceItemsIf(ctx, v, nil), "an empty replacement clears")
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
}
