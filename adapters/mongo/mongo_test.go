package mongo

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestMain(m *testing.M) { testservers.Main(m) }

var dbCounter atomic.Int64

// ferretDB reports whether the Mongo test server is a FerretDB (no TTL
// indexes).
func ferretDB() bool {
	k := testservers.MongoKind()
	return k == testservers.KindFerretDBSQLite || k == testservers.KindFerretDBPostgres
}

// uniqueDB names a database for one test: FerretDB scans whole
// collections, so every test gets its own.
func uniqueDB(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("sessions_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, dbCounter.Add(1))
}

// newClient connects to the test server; the client is disconnected and
// the databases it names are dropped when the test ends.
func newClient(t testing.TB, monitor *event.CommandMonitor) *mongodrv.Client {
	t.Helper()
	uri := testservers.Mongo(t)
	co := options.Client().ApplyURI(uri)
	if monitor != nil {
		co.SetMonitor(monitor)
	}
	c, err := mongodrv.Connect(co)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

// dropOnCleanup drops database db when the test ends.
func dropOnCleanup(t testing.TB, c *mongodrv.Client, db string) {
	t.Helper()
	t.Cleanup(func() { _ = c.Database(db).Drop(context.Background()) })
}

// newTestStore returns a Store on a fresh database of its own client.
func newTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	c := newClient(t, nil)
	if opts.Database == "" {
		opts.Database = uniqueDB(t)
	}
	dropOnCleanup(t, c, opts.Database)
	st, err := New(c, opts)
	require.NoError(t, err)
	return st
}

// mustSession opens a session or fails.
func mustSession(t testing.TB, st *Store, id string) *Session {
	t.Helper()
	s, err := st.Session(id)
	require.NoError(t, err)
	return s
}

// texts returns the items' JSON texts.
func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// numbered returns n items tagged tag.
func numbered(tag string, n int) []session.Item { return conformance.Numbered(tag, n) }

// fakeClock is a clock the TTL clauses move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now().Truncate(time.Millisecond)} }

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// harness runs the conformance suite against the test server: Open and
// OpenPeer use two independent clients on one database.
type harness struct {
	t       *testing.T
	db      string
	st      *Store
	peer    *Store
	raw     *mongodrv.Client
	clock   *fakeClock
	corrupt driver.CorruptLog
	shapes  atomic.Int64

	mu  sync.Mutex
	ttl map[time.Duration]*Store
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, db: uniqueDB(t), clock: newFakeClock(), ttl: map[time.Duration]*Store{}}
	c1, c2 := newClient(t, nil), newClient(t, nil)
	dropOnCleanup(t, c1, h.db)
	var err error
	h.st, err = New(c1, Options{Database: h.db, OnCorrupt: h.corrupt.Handler()})
	require.NoError(t, err)
	h.peer, err = New(c2, Options{Database: h.db, OnCorrupt: h.corrupt.Handler()})
	require.NoError(t, err)
	h.raw = c1
	return h
}

func (h *harness) Name() string { return "mongo/" + testservers.MongoKind() }

// OpenClosed returns a handle on id in a Store of its own on the same
// client, closed (conformance.Closer).
func (h *harness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := New(h.raw, Options{Database: h.db})
	if err != nil {
		return nil, err
	}
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	return s, st.Close(ctx)
}

func (h *harness) Open(_ context.Context, id string) (session.Session, error) {
	return h.st.Session(id)
}

func (h *harness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.peer.Session(id)
}

func (h *harness) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce)
}

// RemoveSession deletes every document of the session (its checkpoints
// too, which Clear keeps), as sessionctl check's harness does, so that the
// suite leaves nothing behind.
func (h *harness) RemoveSession(ctx context.Context, id string) error {
	return h.st.RemoveSession(ctx, id)
}

var _ conformance.Remover = (*harness)(nil)

// AppendRaw stores raw as the session's next record, the way a buggy or
// foreign writer could: it reserves a seq on the session document, as
// every writer does, then inserts a document whose record is raw. The
// document's shape rotates between a batch whose element is raw, a legacy
// per-item document whose message_data is raw, and a document whose
// message_data is raw as BSON binary (a wrong type).
func (h *harness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return appendRawShape(ctx, h.raw.Database(h.db), id, raw, int(h.shapes.Add(1)%3))
}

// appendRawShape inserts one raw record in the given shape (0: element of
// a batch, 1: legacy string, 2: binary message_data).
func appendRawShape(ctx context.Context, db *mongodrv.Database, id string, raw []byte, shape int) error {
	var sd sessionDoc
	err := db.Collection(DefaultSessionsCollection).FindOneAndUpdate(ctx, bson.D{{Key: fSessionID, Value: id}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: fSeq, Value: int64(1)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&sd)
	if err != nil {
		return err
	}
	var data any
	switch shape {
	case 0:
		data = bson.A{string(raw)}
	case 1:
		data = string(raw)
	default:
		data = bson.Binary{Data: raw}
	}
	_, err = db.Collection(DefaultMessagesCollection).InsertOne(ctx, bson.D{
		{Key: fSessionID, Value: id},
		{Key: fMsgSeq, Value: sd.Seq - 1},
		{Key: fMsgGeneration, Value: sd.Generation},
		{Key: fMessageData, Value: data},
	})
	return err
}

func (h *harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

func (h *harness) OpenTTL(_ context.Context, id string, ttl time.Duration) (session.Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.ttl[ttl]
	if st == nil {
		var err error
		st, err = New(h.raw, Options{Database: h.db, TTL: ttl, Now: h.clock.Now, OnCorrupt: h.corrupt.Handler()})
		if err != nil {
			return nil, err
		}
		h.ttl[ttl] = st
	}
	return st.Session(id)
}

func (h *harness) Advance(d time.Duration) { h.clock.Advance(d) }

func (h *harness) MinTTL() time.Duration { return time.Second }

// TestConformance grades the adapter on the test server. It makes
// conformance.Run's two passes itself, each on a database of its own:
// FerretDB scans whole collections, so a second pass on the first pass's
// leftovers would mostly measure that. The capabilities-hidden pass must
// agree with the native one on every base and run-state clause, as Run
// requires.
func TestConformance(t *testing.T) {
	native := conformance.Run(t, newHarness(t), conformance.Options{NativeOnly: true})
	t.Logf("server: %s; %s", testservers.MongoKind(), native.Summary())
	require.Equal(t, conformance.LevelFull, native.Level, native.Summary())
	if testing.Short() {
		return
	}
	hidden := conformance.Run(t, conformance.HideCapabilities(newHarness(t)), conformance.Options{NativeOnly: true})
	status := map[string]conformance.Status{}
	for _, c := range hidden.Clauses {
		status[c.Name] = c.Status
	}
	for _, c := range native.Clauses {
		if c.Group != conformance.GroupBase && c.Group != conformance.GroupHeldWrite {
			continue
		}
		if c.Name == "capabilities/implemented-declared" || c.Name == "capabilities/declared-implemented" {
			continue
		}
		other, ok := status[c.Name]
		if ok && other != c.Status && c.Status != conformance.StatusSkip && other != conformance.StatusSkip {
			t.Errorf("native and capabilities-hidden runs differ on %s: %s vs %s", c.Name, c.Status, other)
		}
	}
	require.True(t, hidden.OK(), hidden.Summary())
}
