package mongo

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
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

// lostOutcome is what one call did under a lost reply.
type lostOutcome int

const (
	tookUnknown lostOutcome = iota // took effect, ErrOutcomeUnknown: as promised
	tookPlain                      // took effect, error without ErrOutcomeUnknown: the bug
	tookNil                        // took effect, no error: the adapter recovered the outcome
	notUnknown                     // did not happen, ErrOutcomeUnknown: allowed
	notPlain                       // did not happen, plain error: allowed
	notNil                         // did not happen, no error: wrong
	notInjected                    // the proxy saw no matching request
	nOutcomes
)

var lostOutcomeNames = [nOutcomes]string{"took+unknown", "took+PLAIN", "took+nil", "none+unknown", "none+plain", "none+nil", "not-injected"}

// bad: took+nil is not (the adapter read the outcome back), and is noted.
func (o lostOutcome) bad() bool {
	return o == tookPlain || o == notNil || o == notInjected
}

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

var (
	lostBase  = []session.Item{session.MustItem(`{"n":1}`), session.MustItem(`{"n":2}`)}
	lostBatch = []session.Item{session.MustItem(`{"new":1}`), session.MustItem(`{"new":2}`)}
)

func lostSetupBase(t *testing.T, st *Store, id string) {
	ctx := context.Background()
	s := mustSession(t, st, id)
	require.NoError(t, s.AddItems(ctx, lostBase))
	_, err := s.SaveCheckpoint(ctx, "c", []byte(`{"v":1}`), 0)
	require.NoError(t, err)
}

// on runs f on the session id of st.
func on(f func(ctx context.Context, s *Session, version string) error) func(context.Context, *Store, string, string) error {
	return func(ctx context.Context, st *Store, id, version string) error {
		s, err := st.Session(id)
		if err != nil {
			return err
		}
		return f(ctx, s, version)
	}
}

var lostOps = []lostOp{
	{name: "AddItems", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) })},
	{name: "AddItems(new session)", setup: func(*testing.T, *Store, string) {},
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) })},
	{name: "AddItemsOnce", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, err := s.AddItemsOnce(ctx, "op-1", lostBatch)
			return err
		})},
	{name: "PopItem", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, _, err := s.PopItem(ctx)
			return err
		})},
	{name: "Clear", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.Clear(ctx) })},
	{name: "ReplaceItems", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.ReplaceItems(ctx, lostBatch) })},
	{name: "ReplaceItemsIf", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, v string) error { return s.ReplaceItemsIf(ctx, v, lostBatch) })},
	{name: "SaveCheckpoint", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, err := s.SaveCheckpoint(ctx, "c", []byte(`{"v":2}`), 1)
			return err
		})},
	{name: "DeleteCheckpoint", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.DeleteCheckpoint(ctx, "c", 1) })},
	{name: "RemoveSession", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error { return st.RemoveSession(ctx, id) }},
	{name: "AppendRaw", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			return (&urlStore{st: st}).AppendRaw(ctx, id, []byte(`{"raw":1}`))
		}},
	{name: "SetSessionTimes", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			var ts adapters.Timestamps = &urlStore{st: st}
			return ts.SetSessionTimes(ctx, id, adapters.SessionTimes{Created: lostOld})
		}},
	{name: "Touch", ttl: true, expiry: true, setup: func(t *testing.T, st *Store, id string) {
		lostSetupBase(t, st, id)
		_, err := st.sessions.UpdateOne(context.Background(), bson.D{{Key: fSessionID, Value: id}},
			bson.D{{Key: "$set", Value: bson.D{{Key: fExpiresAt, Value: time.Now().Add(lostTouchSet)}}}})
		require.NoError(t, err)
	}, do: on(func(ctx context.Context, s *Session, _ string) error { return s.Touch(ctx) })},
}

// lostReps is how often each write loses its commit's reply, per layout
// (each lost reply costs the driver about half a second: it marks the
// server unknown and checks it again).
var lostReps = map[string]int{"plain": 2, "ttl": 1}

// lostTable collects the outcomes, for the log (and docs/reliability.md).
type lostTable struct {
	mu     sync.Mutex
	rows   map[string]*[nOutcomes]int // "layout|op"
	commit map[string]string          // the commit request found by the dry run
}

func (lt *lostTable) add(key string, o lostOutcome) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.rows[key] == nil {
		lt.rows[key] = new([nOutcomes]int)
	}
	lt.rows[key][o]++
}

func (lt *lostTable) String() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	keys := make([]string, 0, len(lt.rows))
	for k := range lt.rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| layout | operation | commit |")
	for _, n := range lostOutcomeNames {
		b.WriteString(" " + n + " |")
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", int(nOutcomes)) + "\n")
	var total [nOutcomes]int
	for _, k := range keys {
		b.WriteString("| " + strings.ReplaceAll(k, "|", " | ") + " | " + lt.commit[k] + " |")
		for i, n := range lt.rows[k] {
			total[i] += n
			fmt.Fprintf(&b, " %d |", n)
		}
		b.WriteString("\n")
	}
	b.WriteString("| all | | |")
	for _, n := range total {
		fmt.Fprintf(&b, " %d |", n)
	}
	b.WriteString("\n")
	return b.String()
}

// findCommit runs op once without a fault and returns the ordinal of the
// request naming the session after whose reply what a reader sees first
// differs (read in the proxy's goroutine as each next request arrives,
// and after the call), and how many such requests it sent.
func findCommit(t *testing.T, p *faultproxy.Proxy, direct, proxied *Store, op lostOp, id string) (int, int) {
	t.Helper()
	ctx := context.Background()
	op.setup(t, direct, id)
	version := lostVersion(t, direct, id)
	initial := snapshot(t, direct, id, op.expiry)
	var mu sync.Mutex
	var states []lostSnapshot // states[i]: before request i+1 was forwarded
	var dumpErr error
	p.Set(faultproxy.LoseReply, func(req []byte) bool {
		if bytes.Contains(req, []byte(id)) {
			s, err := dump(direct, id, op.expiry)
			mu.Lock()
			states = append(states, s)
			dumpErr = cmp.Or(dumpErr, err)
			mu.Unlock()
		}
		return false // count, never inject
	})
	err := op.do(ctx, proxied, id, version)
	p.Set(faultproxy.None, nil)
	require.NoError(t, err, "dry run of %s", op.name)
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, dumpErr)
	states = append(states, snapshot(t, direct, id, op.expiry))
	for i := 1; i < len(states); i++ {
		if states[i] != initial {
			return i, len(states) - 1
		}
	}
	t.Fatalf("%s changed nothing", op.name)
	return 0, 0
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
	table := &lostTable{rows: map[string]*[nOutcomes]int{}, commit: map[string]string{}}
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
					table.mu.Lock()
					table.commit[key] = fmt.Sprintf("%d of %d", commit, total)
					table.mu.Unlock()
					for rep := range lostReps[layout] {
						id := fmt.Sprintf("lost-%s-%d", slug, rep)
						op.setup(t, direct, id)
						version := lostVersion(t, direct, id)
						before := snapshot(t, direct, id, op.expiry)
						var seen atomic.Int32
						n0 := p.Injected.Load()
						p.Once(faultproxy.LoseReply, func(req []byte) bool {
							return bytes.Contains(req, []byte(id)) && seen.Add(1) == int32(commit)
						})
						callErr := op.do(ctx, proxied, id, version)
						p.Set(faultproxy.None, nil)
						injected := p.Injected.Load() - n0
						after := snapshot(t, direct, id, op.expiry)
						took := before != after
						unknown := errors.Is(callErr, session.ErrOutcomeUnknown)
						var o lostOutcome
						switch {
						case injected != 1:
							o = notInjected
						case took && callErr == nil:
							o = tookNil
						case took && unknown:
							o = tookUnknown
						case took:
							o = tookPlain
						case callErr == nil:
							o = notNil
						case unknown:
							o = notUnknown
						default:
							o = notPlain
						}
						table.add(key, o)
						switch {
						case o.bad():
							t.Errorf("%s layout, %s (rep %d, commit = request %d of %d): %s (faults injected: %d), error: %v",
								layout, op.name, rep, commit, total, lostOutcomeNames[o], injected, callErr)
						case o == tookNil:
							t.Logf("%s layout, %s (rep %d): took effect and reported no error: the outcome was recovered", layout, op.name, rep)
						}
					}
				})
			}
		})
	}
}
