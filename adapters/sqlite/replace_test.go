package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// TestReplaceKeepsTheSessionCreatedAt: a replace (repair, compaction) keeps
// the conversation's created_at; only a clear forgets it.
func TestReplaceKeepsTheSessionCreatedAt(t *testing.T) {
	ctx := context.Background()
	st, err := OpenFile(ctx, filepath.Join(t.TempDir(), "s.db"), Options{})
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("s")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	const old = "2001-02-03 04:05:06"
	_, err = st.DB().ExecContext(ctx, `UPDATE agent_sessions SET created_at = ? WHERE session_id = 's'`, old)
	require.NoError(t, err)
	require.NoError(t, s.ReplaceItems(ctx, []session.Item{session.MustItem(`{"n":2}`)}))
	var created string
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT created_at FROM agent_sessions WHERE session_id = 's'`).Scan(&created))
	require.Contains(t, created, "2001-02-03", "created_at kept (the driver may print it in RFC 3339)")
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, `{"n":2}`, items[0].String())
}
