package memory_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var reports []driver.CorruptRecord
	st, err := adapters.OpenWith(ctx, "memory://?ttl=1h&refresh_on_read=true", adapters.Options{OnCorrupt: func(_ context.Context, r driver.CorruptRecord) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r)
	}})
	require.NoError(t, err)
	defer st.Close()

	s, err := st.Session("a")
	require.NoError(t, err)
	require.Equal(t, session.Probe(s), st.Declared(), "declared = probed")
	require.Equal(t, session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce), st.Declared())
	ttl, ok := s.(session.Expirer)
	require.True(t, ok)
	require.Equal(t, "1h0m0s", ttl.TTL().String(), "ttl applied")

	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	raw, ok := st.(driver.RawAppender)
	require.True(t, ok, "memory stores take raw writes")
	require.NoError(t, raw.AppendRaw(ctx, "a", []byte("not json")))
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Len(t, reports, 1)
	require.Equal(t, "not json", string(reports[0].Raw))

	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids)

	other, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	ids, err = other.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "every memory:// Open is a new store")
}

func TestURLOpenerRefuses(t *testing.T) {
	for _, dsn := range []string{"memory://?ttl=1h;x", "memory://?TTL=1h", "memory://?refresh_on_read=sometimes", "memory://?ttl=1h&ttl=1h"} {
		_, err := adapters.Open(context.Background(), dsn)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, dsn)
	}
}
