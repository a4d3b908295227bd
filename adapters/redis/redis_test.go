package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// uniquePrefix returns a key prefix no other test run uses.
func uniquePrefix(tb testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "agents:test:" + hex.EncodeToString(b[:])
}

// standaloneClient returns a new client on the shared standalone server,
// closed at cleanup.
func standaloneClient(tb testing.TB) goredis.UniversalClient {
	tb.Helper()
	o, err := goredis.ParseURL(testservers.Redis(tb))
	require.NoError(tb, err)
	c := goredis.NewClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// clusterClient returns a new client on the shared 3-master cluster,
// closed at cleanup.
func clusterClient(tb testing.TB) *goredis.ClusterClient {
	tb.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testservers.RedisCluster(tb)})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// bothClients makes a client on the standalone server and one on the
// cluster, for tests that run on each.
var bothClients = map[string]func(testing.TB) goredis.UniversalClient{
	"standalone": standaloneClient,
	"cluster":    func(tb testing.TB) goredis.UniversalClient { return clusterClient(tb) },
}

func newStore(tb testing.TB, c goredis.UniversalClient, opts Options) *Store {
	tb.Helper()
	st, err := New(c, opts)
	require.NoError(tb, err)
	return st
}

// harness runs the conformance suite on one Redis deployment: Open uses
// one client, OpenPeer a second, independent one on the same server(s).
type harness struct {
	name     string
	store    *Store
	peer     *Store
	raw      goredis.UniversalClient
	corrupt  driver.CorruptLog
	opts     Options
	mu       sync.Mutex
	ttlStore map[time.Duration]*Store
}

func newHarness(tb testing.TB, name string, mk func(testing.TB) goredis.UniversalClient, layout Layout) *harness {
	h := &harness{name: name, raw: mk(tb), ttlStore: map[time.Duration]*Store{}}
	h.opts = Options{KeyPrefix: uniquePrefix(tb), Layout: layout, OnCorrupt: h.corrupt.Handler()}
	h.store = newStore(tb, h.raw, h.opts)
	h.peer = newStore(tb, mk(tb), h.opts)
	return h
}

func (h *harness) Name() string { return h.name }

// OpenClosed returns a handle on id in a Store of its own on the same
// client, closed (conformance.Closer).
func (h *harness) OpenClosed(_ context.Context, id string) (session.Session, error) {
	st, err := New(h.raw, h.opts)
	if err != nil {
		return nil, err
	}
	s, err := st.Handle(id)
	if err != nil {
		return nil, err
	}
	return s, st.Close()
}
func (h *harness) Open(_ context.Context, id string) (session.Session, error) {
	return h.store.Handle(id)
}
func (h *harness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.peer.Handle(id)
}

// Declared: the Python layout is no session.Follower (Store.Handle).
func (h *harness) Declared() session.Capabilities {
	caps := session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace,
		session.CapFollow, session.CapAppendOnce)
	if h.opts.Layout == LayoutPython {
		caps &^= session.Caps(session.CapFollow)
	}
	return caps
}

// RemoveSession deletes every key of the session, its checkpoint hash
// included (Clear keeps that one), so that the suite leaves nothing behind.
func (h *harness) RemoveSession(ctx context.Context, id string) error {
	return h.store.RemoveSession(ctx, id)
}

// AppendRaw pushes raw bytes onto the session's list with a plain RPUSH.
func (h *harness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	s, err := h.store.Session(id)
	if err != nil {
		return err
	}
	return h.raw.RPush(ctx, s.Keys()[0], raw).Err()
}
func (h *harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

func (h *harness) OpenTTL(_ context.Context, id string, ttl time.Duration) (session.Session, error) {
	h.mu.Lock()
	st := h.ttlStore[ttl]
	if st == nil {
		opts := h.opts
		opts.TTL = ttl
		var err error
		if st, err = New(h.raw, opts); err != nil {
			h.mu.Unlock()
			return nil, err
		}
		h.ttlStore[ttl] = st
	}
	h.mu.Unlock()
	return st.Handle(id)
}

// Advance sleeps: expiry runs on the server's real clock.
func (h *harness) Advance(d time.Duration) { time.Sleep(d) }
func (h *harness) MinTTL() time.Duration   { return time.Second }

var (
	_ driver.RawAppender          = (*harness)(nil)
	_ conformance.CorruptReporter = (*harness)(nil)
	_ conformance.TTLHarness      = (*harness)(nil)
	_ conformance.Remover         = (*harness)(nil)
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(testing.TB) goredis.UniversalClient
		layout Layout
	}{
		{"redis-standalone", standaloneClient, LayoutNative},
		{"redis-cluster", func(tb testing.TB) goredis.UniversalClient { return clusterClient(tb) }, LayoutNative},
		{"redis-standalone-python-layout", standaloneClient, LayoutPython},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tc.name, tc.client, tc.layout)
			rep := conformance.Run(t, h, conformance.Options{})
			require.Equal(t, conformance.LevelFull, rep.Level, "%s must grade FULL: %s", tc.name, rep.Summary())
		})
	}
}
