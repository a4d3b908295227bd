package contract

import (
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func isCloser(h suite.Harness) bool { _, ok := h.(suite.Closer); return ok }

// clauseAfterClose: every call on a session of a closed store fails with
// session.ErrClosed, so that use after close shows in tests on any
// adapter, the reference one included.
func clauseAfterClose(c *suite.C) {
	s, err := c.Harness().(suite.Closer).OpenClosed(c.Context(), c.ID("closed"))
	require.NoError(c, err)
	ctx := c.Context()
	it := numbered("x", 1)
	calls := map[string]func() error{
		"AddItems": func() error { return s.AddItems(ctx, it) },
		"Items":    func() error { _, err := s.Items(ctx); return err },
		"PopItem":  func() error { _, _, err := s.PopItem(ctx); return err },
		"Clear":    func() error { return s.Clear(ctx) },
	}
	if l, ok := s.(session.LatestReader); ok {
		calls["LatestItems"] = func() error { _, err := l.LatestItems(ctx, 1); return err }
	}
	if r, ok := s.(session.Replacer); ok {
		calls["ReplaceItems"] = func() error { return r.ReplaceItems(ctx, it) }
	}
	if v, ok := s.(session.VersionedReplacer); ok {
		calls["HistoryVersion"] = func() error { _, err := v.HistoryVersion(ctx); return err }
	}
	if f, ok := s.(session.Follower); ok {
		calls["ItemsSince"] = func() error { _, _, err := f.ItemsSince(ctx, ""); return err }
	}
	if o, ok := s.(session.OnceAppender); ok {
		calls["AddItemsOnce"] = func() error { _, err := o.AddItemsOnce(ctx, "op", it); return err }
	}
	if cs, ok := s.(session.CheckpointStore); ok {
		calls["SaveCheckpoint"] = func() error { _, err := cs.SaveCheckpoint(ctx, "run", []byte(`{}`), 0); return err }
		calls["LoadCheckpoint"] = func() error { _, _, err := cs.LoadCheckpoint(ctx, "run"); return err }
	}
	for name, call := range calls {
		require.ErrorIs(c, call(), session.ErrClosed, "%s after Close", name)
	}
}
