package postgres

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// TestLongSessionID: an id too long for an index entry, even compressed,
// is an IDTooLongError wrapping session.ErrInvalidSessionID, naming the
// session (cut short and quoted) and the limit, and nothing is written; a
// long id PostgreSQL compresses below the limit works.
func TestLongSessionID(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	var b [6000]byte
	_, _ = rand.Read(b[:])
	random := base64.StdEncoding.EncodeToString(b[:]) // 8000 bytes that do not compress
	for _, id := range []string{random, "\x00" + random[:5000]} {
		s, err := st.Session(id)
		require.NoError(t, err)
		check := func(what string, err error) {
			t.Helper()
			require.ErrorIs(t, err, session.ErrInvalidSessionID, "%s: %v", what, err)
			require.False(t, errors.Is(err, session.ErrOutcomeUnknown), what)
			var tl *IDTooLongError
			require.ErrorAs(t, err, &tl, what)
			require.Equal(t, id, tl.ID)
			require.Equal(t, len(storedID(id)), tl.Stored)
			msg := err.Error()
			require.Contains(t, msg, "2704", what)
			require.Less(t, len(msg), 600, "%s: the message cuts the id short: %s", what, msg)
			require.NotContains(t, msg, "\x00", what)
			require.Contains(t, msg, `"`+strings.ReplaceAll(id[:10], "\x00", `\x00`), what)
		}
		check("add items", s.AddItems(ctx, numbered("l", 0, 2)))
		check("replace items", s.ReplaceItems(ctx, numbered("l", 0, 2)))
		check("replace items if", s.ReplaceItemsIf(ctx, "0.", numbered("l", 0, 2)))
		_, err = s.AppendWithCheckpoint(ctx, numbered("l", 0, 2), "ck", []byte("doc"), 0)
		check("append with checkpoint", err)
		_, err = s.SaveCheckpoint(ctx, "ck", []byte("doc"), 0)
		check("save checkpoint", err)
		check("append raw", st.AppendRaw(ctx, id, []byte(`{}`)))
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, got)
		require.NoError(t, s.Clear(ctx))
	}
	var rows int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM `+st.q.messages+`) + (SELECT count(*) FROM `+st.q.sessions+`)`).Scan(&rows))
	require.Zero(t, rows, "nothing was written")

	long := strings.Repeat("conversation-", 500) // 6500 bytes that compress
	s, err := st.Session(long)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("c", 0, 2)))
	got, err := s.LatestItems(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, strs(numbered("c", 1, 2)), strs(got))
}
