// Package storetest gives tests a store of every backend (memory, SQLite,
// Redis, Redis Cluster, the Mongo-wire server, PostgreSQL; real servers from
// internal/testkit/testservers) and a conformance harness over any of them, with an
// optional wrapper applied to every session: the wrappers' tests (encrypted,
// otelsession) run the whole suite on every backend through it.
package storetest

import (
	"context"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Backend names a store and makes fresh ones.
type Backend struct {
	Name string
	// URL returns the URL of a fresh, empty store of this backend.
	URL func(t testing.TB) string
	// TTL reports whether the backend takes a ttl option.
	TTL bool
	// MinTTL is the shortest TTL the TTL clauses may use on this backend,
	// on real clocks: a margin of that much must cover one write and one
	// read, however loaded the machine (default 120ms: a race build on a
	// busy 2-core machine stalled a 50ms margin).
	MinTTL time.Duration
	// Peer reports whether two opens reach one store through independent
	// clients (false for memory://, where each open is a new store).
	Peer bool
	// Slow marks the Mongo-wire test server, whose every query scans a
	// collection: suites that run on every backend run the contract's
	// capabilities-hidden pass elsewhere only (Options.NativeOnly).
	Slow bool
}

var unique atomic.Int64

// Unique returns a name no other call in this process returns.
func Unique(prefix string) string {
	return prefix + strconv.FormatInt(time.Now().UnixNano()%1e10, 36) + "x" + strconv.FormatInt(unique.Add(1), 36)
}

// ContractOnly selects the contract's clauses (conformance.Options.Run):
// the wrappers' suites run the held-write part over the Mongo-wire server
// only in adapters/mongo, where it takes minutes (every abandoned
// reservation a fault leaves holds the next append for its 2 s).
var ContractOnly = regexp.MustCompile(`^(core|input|ids|corrupt|cancel|concurrency|capabilities|limit|replace|run-context|ttl|checkpoints|checkpoint-commit|versioned-replace|follow|append-once)/`)

// Options returns the conformance options a wrapper's suite uses on b:
// on a Slow backend, the native contract alone.
func Options(b Backend) conformance.Options {
	if b.Slow {
		return conformance.Options{NativeOnly: true, Run: ContractOnly}
	}
	return conformance.Options{}
}

// Graded reports whether a wrapper's suite grades part on b (see Options).
func Graded(b Backend, part string) bool {
	return part != conformance.PartContractHidden && (!b.Slow || part == conformance.PartContract)
}

// Backends lists every backend.
func Backends() []Backend {
	return []Backend{
		{Name: "memory", URL: func(testing.TB) string { return "memory://" }, TTL: true},
		{Name: "sqlite", URL: func(t testing.TB) string {
			return "sqlite://" + filepath.Join(t.TempDir(), "sessions.db")
		}, Peer: true},
		{Name: "redis", URL: func(t testing.TB) string {
			return testservers.Redis(t) + "?key_prefix=" + Unique("st")
		}, TTL: true, Peer: true, MinTTL: networkMinTTL},
		{Name: "redis-cluster", URL: func(t testing.TB) string {
			return "redis+cluster://" + strings.Join(testservers.RedisCluster(t), ",") + "?key_prefix=" + Unique("st")
		}, TTL: true, Peer: true, MinTTL: networkMinTTL},
		{Name: "mongo", URL: func(t testing.TB) string {
			u, err := url.Parse(testservers.Mongo(t))
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/" + Unique("st")
			return u.String()
		}, TTL: true, Peer: true, Slow: true, MinTTL: networkMinTTL},
		{Name: "postgres", URL: func(t testing.TB) string {
			return testservers.Postgres(t) + sep(testservers.Postgres(t)) + "messages_table=" + Unique("m") + "&sessions_table=" + Unique("s") + "&checkpoints_table=" + Unique("c")
		}, Peer: true},
	}
}

// networkMinTTL is MinTTL for the networked backends: a write to the
// Mongo-wire test server takes over 50ms when the machine is busy.
const networkMinTTL = 250 * time.Millisecond

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// Harness is a conformance.Harness over a store opened from a URL, with
// wrap applied to every session it hands out (nil: none). It implements
// the corrupt-record and TTL hooks where the backend supports them.
type Harness struct {
	name    string
	url     string
	store   adapters.Store
	peer    adapters.Store
	corrupt *driver.CorruptLog
	wrap    func(session.Session) (session.Session, error)
	ttl     bool
	minTTL  time.Duration
	cleanup func(func())
}

// NewHarness opens b's fresh store twice (the peer through its own client)
// and closes both when t ends.
func NewHarness(t testing.TB, b Backend, wrap func(session.Session) (session.Session, error)) *Harness {
	t.Helper()
	ctx := context.Background()
	u := b.URL(t)
	corrupt := &driver.CorruptLog{}
	st, err := adapters.OpenWith(ctx, u, adapters.Options{OnCorrupt: corrupt.Handler()})
	if err != nil {
		t.Fatalf("open %s: %v", b.Name, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	peer := st
	if b.Peer {
		if peer, err = adapters.OpenWith(ctx, u, adapters.Options{OnCorrupt: corrupt.Handler()}); err != nil {
			t.Fatalf("open %s peer: %v", b.Name, err)
		}
		t.Cleanup(func() { _ = peer.Close() })
	}
	minTTL := b.MinTTL
	if minTTL == 0 {
		minTTL = 120 * time.Millisecond
	}
	return &Harness{name: b.Name, url: u, store: st, peer: peer, corrupt: corrupt, wrap: wrap, ttl: b.TTL, minTTL: minTTL, cleanup: t.Cleanup}
}

func (h *Harness) open(st adapters.Store, id string) (session.Session, error) {
	s, err := st.Session(id)
	if err != nil || h.wrap == nil {
		return s, err
	}
	return h.wrap(s)
}

// Name names the backend.
func (h *Harness) Name() string { return h.name }

// Open returns a (wrapped) handle on session id.
func (h *Harness) Open(_ context.Context, id string) (session.Session, error) {
	return h.open(h.store, id)
}

// OpenClosed returns a (wrapped) handle on session id in a store of its
// own, opened from the same URL and closed (conformance.Closer). A
// memory:// URL opens a new store: closing it closes nothing shared.
func (h *Harness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := adapters.Open(ctx, h.url)
	if err != nil {
		return nil, err
	}
	s, err := h.open(st, id)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return s, st.Close()
}

// OpenPeer returns a (wrapped) handle through the second client.
func (h *Harness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.open(h.peer, id)
}

// Declared returns what a wrapped session probes as: the wrapper decides
// what it passes through, and the suite checks the sessions against it.
func (h *Harness) Declared() session.Capabilities {
	s, err := h.Open(context.Background(), conformance.ProbePrefix+"declared")
	if err != nil {
		return 0
	}
	return session.Probe(s)
}

// AppendRaw stores raw unvalidated in the underlying store.
func (h *Harness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return h.store.(driver.RawAppender).AppendRaw(ctx, id, raw)
}

// CorruptReports returns the underlying store's reports for id.
func (h *Harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

// OpenTTL opens the session on a store of the same URL with a ttl.
func (h *Harness) OpenTTL(ctx context.Context, id string, ttl time.Duration) (session.Session, error) {
	if !h.ttl {
		return nil, session.ErrUnsupported
	}
	st, err := adapters.Open(ctx, h.url+sep(h.url)+"ttl="+ttl.String())
	if err != nil {
		return nil, err
	}
	h.cleanup(func() { _ = st.Close() })
	return h.open(st, id)
}

// Advance sleeps: the TTL clauses run on real clocks.
func (h *Harness) Advance(d time.Duration) { time.Sleep(d) }

// MinTTL is the backend's MinTTL.
func (h *Harness) MinTTL() time.Duration { return h.minTTL }
