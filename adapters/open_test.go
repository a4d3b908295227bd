package adapters_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/session"
)

func TestOpenRefusesBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{
		"", "   ", "nocolon", "ftp://x", "sqlite://", "sqlite:///tmp/x.db?unknown=1",
		"sqlite:///tmp/x.db?busy_timeout=soon", "memory://?ttl=forever", "memory://?ttl=-1s",
		"redis://127.0.0.1:1/0?layout=sideways", "redis://127.0.0.1:1/0?ttl=x",
		"redis://127.0.0.1:1/0?refresh_on_read=maybe", "mongodb://127.0.0.1:1/db?max_batch_bytes=-5",
		"%zz",
	} {
		_, err := adapters.Open(ctx, dsn)
		require.Error(t, err, dsn)
		require.True(t, errors.Is(err, adapters.ErrInvalidDSN), "%q: want ErrInvalidDSN, got %v", dsn, err)
	}
}

func TestOpenRedactsPasswords(t *testing.T) {
	_, err := adapters.Open(context.Background(), "redis://user:s3cret@127.0.0.1:1/0?layout=bad")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}

func TestOpenedStoresWork(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{"memory://", "memory://?ttl=1h", "sqlite://" + filepath.Join(t.TempDir(), "s.db"), "sqlite::memory:"} {
		st, err := adapters.Open(ctx, dsn)
		require.NoError(t, err, dsn)
		s, err := st.Session("a:{b}")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"a":1}`)}))
		items, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.Equal(t, st.Declared(), session.Probe(s), "%s declares what its sessions implement", dsn)
		l, ok := st.(adapters.Lister)
		require.True(t, ok)
		ids, err := l.ListSessions(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"a:{b}"}, ids)
		_, err = st.Session("")
		require.ErrorIs(t, err, session.ErrInvalidSessionID)
		require.NoError(t, st.Close())
	}
}
