package mongo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/lostreply"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// Lost replies (issue 36, item 1), as adapters/redis/lostreply_test.go
// does it for Redis. A faultproxy.Proxy sits between a Store and the
// Mongo-wire server (FerretDB here); a second Store on a direct client
// reads the same database. A write here is several round trips (a
// reservation, an insert, the commit on the session document, clean-up),
// so a dry run (no fault) finds each write's commit: the request naming
// the session after whose reply what a reader sees of the session (its
// items, checkpoints, times, expiry; read directly) first differs. Then,
// on fresh sessions, the proxy lets that request through, waits for the
// server's reply (the update is applied) and closes the connection
// instead of forwarding it. The call must then return an error wrapping
// session.ErrOutcomeUnknown, or have written nothing.

// lostSnapshot is what a reader sees of a session, read directly.
type lostSnapshot string

const (
	lostStoreTTL   = time.Hour
	lostTouchSet   = 1000 * time.Second // Touch's setup moves the expiry this close
	lostTouchFloor = 2000 * time.Second // an expiry beyond this was restarted
)

var lostOld = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// dump reads the session through the direct Store: its items, its
// checkpoints (name, version, document), whether its created_at is
// lostOld (SetSessionTimes's), and, with expiry (Touch's), whether it
// expires beyond lostTouchFloor (not for the others: a reservation that
// creates the session document starts its expiry before its batch is
// committed). The proxy's goroutine calls it too.
func dump(direct *Store, id string, expiry bool) (lostSnapshot, error) {
	ctx := context.Background()
	s, err := direct.Session(id)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	items, err := s.Items(ctx)
	if err != nil {
		return "", err
	}
	for _, it := range items {
		b.WriteString(it.String() + "\n")
	}
	names, err := s.ListCheckpoints(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		doc, v, err := s.LoadCheckpoint(ctx, n)
		if errors.Is(err, session.ErrNoCheckpoint) {
			continue
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "checkpoint %s@%d=%s\n", n, v, doc)
	}
	ts, ok, err := (&urlStore{st: direct}).SessionTimes(ctx, id)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "old created_at: %v\n", ok && ts.Created.Equal(lostOld))
	if expiry {
		d, ok, err := s.ExpiresIn(ctx)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "long expiry: %v\n", ok && d > lostTouchFloor)
	}
	return lostSnapshot(b.String()), nil
}

func snapshot(t *testing.T, direct *Store, id string, expiry bool) lostSnapshot {
	t.Helper()
	s, err := dump(direct, id, expiry)
	require.NoError(t, err)
	return s
}

// lostOp is one write under a lost reply: setup prepares the session
// through the direct Store, do is the call through the proxy.
type lostOp struct {
	name   string
	ttl    bool // only on the Store with a TTL
	expiry bool // the snapshot says whether the expiry was restarted
	setup  func(t *testing.T, st *Store, id string)
	do     func(ctx context.Context, st *Store, id, version string) error
}

// lostSetup runs a lostreply setup on the session id of st.
func lostSetup(setup func(context.Context, session.Session) error) func(*testing.T, *Store, string) {
	return func(t *testing.T, st *Store, id string) {
		require.NoError(t, setup(context.Background(), mustSession(t, st, id)))
	}
}

// lostSetupBase gives the session id lostreply's base items and checkpoint.
var lostSetupBase = lostSetup(lostreply.SetupBase)

// lostOps are lostreply's common writes, then the Store's own and Touch.
var lostOps = append(lostWrites(),
	lostOp{name: "RemoveSession", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error { return st.RemoveSession(ctx, id) }},
	lostOp{name: "AppendRaw", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			return (&urlStore{st: st}).AppendRaw(ctx, id, []byte(`{"raw":1}`))
		}},
	lostOp{name: "SetSessionTimes", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			var ts adapters.Timestamps = &urlStore{st: st}
			return ts.SetSessionTimes(ctx, id, adapters.SessionTimes{Created: lostOld})
		}},
	lostOp{name: "Touch", ttl: true, expiry: true, setup: func(t *testing.T, st *Store, id string) {
		lostSetupBase(t, st, id)
		_, err := st.sessions.UpdateOne(context.Background(), bson.D{{Key: fSessionID, Value: id}},
			bson.D{{Key: "$set", Value: bson.D{{Key: fExpiresAt, Value: time.Now().Add(lostTouchSet)}}}})
		require.NoError(t, err)
	}, do: lostreply.On((*Store).Session, func(ctx context.Context, s session.Session, _ string) error {
		return s.(session.Expirer).Touch(ctx)
	})},
)

// lostWrites are lostreply.Writes(extra...) as lostOps.
func lostWrites(extra ...string) (ops []lostOp) {
	for _, w := range lostreply.Writes(extra...) {
		ops = append(ops, lostOp{name: w.Name, setup: lostSetup(w.Setup), do: lostreply.On((*Store).Session, w.Do)})
	}
	return ops
}

// lostReps is how often each write loses its commit's reply, per layout
// (each lost reply costs the driver about half a second: it marks the
// server unknown and checks it again).
var lostReps = map[string]int{"plain": 2, "ttl": 1}

// findCommit runs op once without a fault (lostreply.FindCommit) and
// returns the ordinal of the request naming the session after whose
// reply what a reader sees first differs, and how many such requests it
// sent.
func findCommit(t *testing.T, p *faultproxy.Proxy, direct, proxied *Store, op lostOp, id string) (int, int) {
	t.Helper()
	op.setup(t, direct, id)
	version := lostVersion(t, direct, id)
	return lostreply.FindCommit(t, p, op.name, namesSession(id),
		func() (lostSnapshot, error) { return dump(direct, id, op.expiry) },
		func() error { return op.do(context.Background(), proxied, id, version) })
}

// namesSession reports whether a request names the session id.
func namesSession(id string) func([]byte) bool {
	return func(req []byte) bool { return bytes.Contains(req, []byte(id)) }
}

func lostVersion(t *testing.T, st *Store, id string) string {
	t.Helper()
	v, err := mustSession(t, st, id).HistoryVersion(context.Background())
	require.NoError(t, err)
	return v
}

// TestLostReplyOutcome loses the reply of every write's commit, on a
// Store without and with a TTL (the write paths that differ: expiry
// stamps, Touch), and fails on any write that took effect and reported a
// plain error (or reported success and did nothing). The layout is the
// Python SDK's MongoDBSession's either way: the adapter has no other.
func TestLostReplyOutcome(t *testing.T) {
	table := lostreply.NewTable("layout", "operation").WithCommit()
	t.Cleanup(func() { t.Logf("lost replies (mongo, %s):\n%s", testservers.MongoKind(), table) })
	ctx := context.Background()
	u, err := url.Parse(testservers.Mongo(t))
	require.NoError(t, err)
	p, err := faultproxy.Start(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	pc, err := mongodrv.Connect(options.Client().ApplyURI(u.String()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = pc.Disconnect(context.Background()) })
	dc := newClient(t, nil)
	db := uniqueDB(t)
	dropOnCleanup(t, dc, db)

	for _, layout := range []string{"plain", "ttl"} {
		opts := Options{Database: db}
		if layout == "ttl" {
			opts.TTL = lostStoreTTL
		}
		direct, err := New(dc, opts)
		require.NoError(t, err)
		proxied, err := New(pc, opts)
		require.NoError(t, err)
		t.Run(layout, func(t *testing.T) {
			for _, op := range lostOps {
				if op.ttl && layout != "ttl" {
					continue
				}
				key := layout + "|" + op.name
				t.Run(strings.ReplaceAll(op.name, " ", "_"), func(t *testing.T) {
					slug := layout + "-" + strings.NewReplacer(" ", "", "(", "", ")", "").Replace(op.name)
					commit, total := findCommit(t, p, direct, proxied, op, "lost-dry-"+slug)
					table.SetCommit(key, fmt.Sprintf("%d of %d", commit, total))
					for rep := range lostReps[layout] {
						id := fmt.Sprintf("lost-%s-%d", slug, rep)
						op.setup(t, direct, id)
						version := lostVersion(t, direct, id)
						before := snapshot(t, direct, id, op.expiry)
						injected, callErr := lostreply.LoseNth(p, namesSession(id), commit,
							func() error { return op.do(ctx, proxied, id, version) })
						o := lostreply.Classify(before != snapshot(t, direct, id, op.expiry), injected == 1, callErr)
						table.Add(key, o)
						switch {
						case o.Bad():
							t.Errorf("%s layout, %s (rep %d, commit = request %d of %d): %s (faults injected: %d), error: %v",
								layout, op.name, rep, commit, total, o, injected, callErr)
						case o == lostreply.TookNil: // the adapter read the outcome back
							t.Logf("%s layout, %s (rep %d): took effect and reported no error: the outcome was recovered", layout, op.name, rep)
						}
					}
				})
			}
		})
	}
}
