package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// TestStoreBecomesAdvancedAfterOpen (issue 36 item 4): a file Go opened
// as a plain store, which the Python SDK's AdvancedSQLiteSession then
// takes over (its tables created by another connection), refuses every
// later write to its history with ErrAdvancedStore, as a store that was
// one at open does: Go's rows would be invisible to the class, and its
// next pop_item would delete them.
func TestStoreBecomesAdvancedAfterOpen(t *testing.T) {
	ctx := context.Background()
	item := session.MustItem(`{"role":"user","content":"from go"}`)
	calls := map[string]func(st *Store, s *Session) error{
		"AddItems":      func(_ *Store, s *Session) error { return s.AddItems(ctx, []session.Item{item}) },
		"PopItem":       func(_ *Store, s *Session) error { _, _, err := s.PopItem(ctx); return err },
		"Clear":         func(_ *Store, s *Session) error { return s.Clear(ctx) },
		"ReplaceItems":  func(_ *Store, s *Session) error { return s.ReplaceItems(ctx, []session.Item{item}) },
		"RemoveSession": func(st *Store, _ *Session) error { return st.RemoveSession(ctx, "conv") },
		"AddItemsOnce": func(_ *Store, s *Session) error {
			_, err := s.AddItemsOnce(ctx, "op", []session.Item{item})
			return err
		},
		"AppendWithCheckpoint": func(_ *Store, s *Session) error {
			_, err := s.AppendWithCheckpoint(ctx, []session.Item{item}, "run", []byte(`{}`), 0)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st, err := OpenFile(ctx, path, Options{})
			require.NoError(t, err)
			defer st.Close()
			s, err := st.Session("conv")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"role":"user","content":"before"}`)}),
				"a plain store takes writes")

			py := newAdvancedPy(t, path, "conv") // the class's tables appear
			py.addItems("main", `{"role":"user","content":"one"}`)
			before := py.dump()

			err = call(st, s)
			require.ErrorIs(t, err, ErrAdvancedStore, name)
			require.ErrorIs(t, err, session.ErrUnsupported, name)
			require.Equal(t, before, py.dump(), "%s changed no row", name)

			_, err = s.SaveCheckpoint(ctx, "alone", []byte(`{"v":1}`), 0)
			require.NoError(t, err, "a checkpoint alone touches none of the class's tables")
		})
	}
}
