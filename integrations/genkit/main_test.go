package genkit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// TestMain stops the test servers (Redis, PostgreSQL, the Mongo-wire
// server) the backends started.
func TestMain(m *testing.M) { testservers.Main(m) }

// backend is one of the library's backends with the means to open it
// again: open returns the shared store where every open of the URL is a
// new store (memory://), and a new client otherwise.
type backend struct {
	storetest.Backend
	url    string
	shared adapters.Store
}

func newBackend(t *testing.T, b storetest.Backend) *backend {
	t.Helper()
	be := &backend{Backend: b, url: b.URL(t)}
	if !b.Peer {
		be.shared = openStore(t, b.Name, be.url)
		t.Cleanup(func() { _ = be.shared.Close() })
	}
	return be
}

// open returns a store over the backend and its close function: a
// separate client, as another process would have, where the backend has
// one.
func (b *backend) open(t *testing.T) (adapters.Store, func()) {
	t.Helper()
	if b.shared != nil {
		return b.shared, func() {}
	}
	st := openStore(t, b.Name, b.url)
	return st, func() { require.NoError(t, st.Close()) }
}

func openStore(t *testing.T, name, u string) adapters.Store {
	t.Helper()
	st, err := adapters.Open(context.Background(), u)
	require.NoError(t, err, "open %s", name)
	return st
}

// newStore is genkitstore.New that fails the test on error.
func newStore[S any](t *testing.T, st adapters.Store, opts genkitstore.Options) *genkitstore.Store[S] {
	t.Helper()
	s, err := genkitstore.New[S](st, opts)
	require.NoError(t, err)
	return s
}

// logServers says which servers the networked backends ran on.
func logServers(t *testing.T) {
	t.Logf("servers: redis %q, redis-cluster %q, mongo %q, postgres %q",
		testservers.RedisKind(), testservers.RedisClusterKind(), testservers.MongoKind(), testservers.PostgresKind())
}
