package redis

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/lostreply"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// Lost replies (issue 36, item 1). A faultproxy.Proxy sits in front of
// every data server of a deployment (the client's Dialer sends each
// server's connections to that server's proxy: the address the server
// announces, to go-redis or to sentinels, stays the server's own, and
// every byte still goes through the proxy). For each write, the proxy
// lets the request through, waits for the server's reply (the write has
// run) and closes the connection instead of forwarding it. The call must
// then return an error wrapping session.ErrOutcomeUnknown, or have
// written nothing: a plain error means "nothing was written", and a
// caller that retries on it duplicates an append or pops a second item.

// lostDeployment is a deployment with a proxy in front of each data
// server: proxied goes through them, direct does not (it reads what the
// server holds).
type lostDeployment struct {
	name    string
	proxied goredis.UniversalClient
	direct  goredis.UniversalClient
	proxies []*faultproxy.Proxy
	sharded bool
}

// proxyDialer returns a Dialer that sends connections to each address of
// targets through a proxy of its own (started here), and the others (the
// sentinels) straight to their address.
func proxyDialer(t *testing.T, targets []string) (func(ctx context.Context, network, addr string) (net.Conn, error), []*faultproxy.Proxy) {
	t.Helper()
	front := map[string]string{}
	var proxies []*faultproxy.Proxy
	for _, a := range targets {
		p, err := faultproxy.Start(a)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		front[a] = p.Addr()
		proxies = append(proxies, p)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if f, ok := front[addr]; ok {
			addr = f
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}, proxies
}

func newLostDeployment(t *testing.T, name string) *lostDeployment {
	t.Helper()
	d := &lostDeployment{name: name}
	switch name {
	case "standalone":
		o, err := goredis.ParseURL(testservers.Redis(t))
		require.NoError(t, err)
		direct := goredis.NewClient(o)
		dial, proxies := proxyDialer(t, []string{o.Addr})
		po := *o
		po.Dialer = dial
		d.proxied, d.direct, d.proxies = goredis.NewClient(&po), direct, proxies
	case "sentinel":
		g := testservers.NewSentinelGroup(t)
		u, err := url.Parse(g.URL(""))
		require.NoError(t, err)
		primary, err := g.Primary()
		require.NoError(t, err)
		dial, proxies := proxyDialer(t, []string{primary})
		d.proxied = goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: testservers.SentinelMaster, SentinelAddrs: strings.Split(u.Host, ","), Dialer: dial})
		d.direct, d.proxies = goredis.NewClient(&goredis.Options{Addr: primary}), proxies
	case "cluster":
		addrs := testservers.RedisCluster(t)
		dial, proxies := proxyDialer(t, addrs)
		d.proxied = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, Dialer: dial})
		d.direct, d.proxies, d.sharded = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs}), proxies, true
	default:
		t.Fatalf("unknown deployment %q", name)
	}
	t.Cleanup(func() { _ = d.proxied.Close(); _ = d.direct.Close() })
	return d
}

// arm makes every proxy lose the reply of the first request for which
// match reports true, and returns the faults injected so far.
func (d *lostDeployment) arm(match func([]byte) bool) int64 {
	var n int64
	for _, p := range d.proxies {
		n += p.Injected.Load()
		p.Once(faultproxy.LoseReply, match)
	}
	return n
}

// disarm heals every proxy and returns the faults injected so far.
func (d *lostDeployment) disarm() int64 {
	var n int64
	for _, p := range d.proxies {
		p.Set(faultproxy.None, nil)
		n += p.Injected.Load()
	}
	return n
}

// lostSnapshot is what a session holds, read past the proxies.
type lostSnapshot struct {
	items       []string
	checkpoints map[string]string
	longTTL     bool // the items list expires in more than lostTouchFloor
}

// lostTouchFloor: Touch's check sets the items list's expiry to
// lostTouchSet first; the Store's TTL (an hour) is above the floor.
const (
	lostTouchSet   = 1000 * time.Second
	lostTouchFloor = 2000 * time.Second
	lostStoreTTL   = time.Hour
)

func snapshot(t *testing.T, c goredis.UniversalClient, s *Session) lostSnapshot {
	t.Helper()
	ctx := context.Background()
	items, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
	require.NoError(t, err)
	cps, err := c.HGetAll(ctx, s.CheckpointKey()).Result()
	require.NoError(t, err)
	ttl, err := c.PTTL(ctx, s.Keys()[0]).Result()
	require.NoError(t, err)
	return lostSnapshot{items: items, checkpoints: cps, longTTL: ttl > lostTouchFloor}
}

func (a lostSnapshot) equal(b lostSnapshot) bool {
	if !slices.Equal(a.items, b.items) || a.longTTL != b.longTTL || len(a.checkpoints) != len(b.checkpoints) {
		return false
	}
	for k, v := range a.checkpoints {
		if w, ok := b.checkpoints[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// lostOp is one write under a lost reply: setup prepares the session
// (through a Store on the direct client), do is the call through the
// proxies, match picks the request whose reply is lost (nil: the first
// one naming the session).
type lostOp struct {
	name  string
	ttl   bool // on the Store with a TTL
	wait  bool // on the Store with WaitReplicas (sentinel only: the one deployment with a replica)
	setup func(t *testing.T, s *Session)
	do    func(ctx context.Context, st *Store, s *Session, version string) error
	match func(s *Session) func([]byte) bool
	// check, when set, runs after a call that took effect.
	check func(t *testing.T, s *Session, before lostSnapshot, callErr error)
}

// checkPopRecovered: the pop's error carries its token; RecoverPop
// returns the item it removed (the newest), and PopItemWithToken with
// the token returns it again without removing another.
func checkPopRecovered(t *testing.T, s *Session, before lostSnapshot, callErr error) {
	t.Helper()
	ctx := context.Background()
	var pe *PopUnknownError
	require.ErrorAs(t, callErr, &pe)
	newest := before.items[len(before.items)-1]
	it, ok, err := s.RecoverPop(ctx, pe.Token)
	require.NoError(t, err)
	require.True(t, ok, "RecoverPop: the pop removed an item")
	require.Equal(t, newest, it.String())
	it, ok, err = s.PopItemWithToken(ctx, pe.Token)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, newest, it.String(), "the retry with the token returns the item it popped")
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, len(before.items)-1, "the retry removed nothing more")
}

var (
	lostBase   = []session.Item{session.MustItem(`{"n":1}`), session.MustItem(`{"n":2}`)}
	lostBatch  = []session.Item{session.MustItem(`{"new":1}`), session.MustItem(`{"new":2}`)}
	lostUnsure = session.MustItem(`{"s":"\ud800"}`) // the server's check is not sure of it: PopItem's second script pops it
)

func lostSetupBase(t *testing.T, s *Session) {
	ctx := context.Background()
	require.NoError(t, s.AddItems(ctx, lostBase))
	_, err := s.SaveCheckpoint(ctx, "c", []byte(`{"v":1}`), 0)
	require.NoError(t, err)
}

// scriptMatch loses the reply of the request that runs one of scripts
// (by SHA1) on the session.
func scriptMatch(scripts ...*script) func(s *Session) func([]byte) bool {
	return func(s *Session) func([]byte) bool {
		return func(req []byte) bool {
			if !bytes.Contains(req, []byte(s.SessionID())) {
				return false
			}
			for _, sc := range scripts {
				if bytes.Contains(req, []byte(sc.sha)) {
					return true
				}
			}
			return false
		}
	}
}

var lostOps = []lostOp{
	{name: "AddItems", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) }},
	{name: "AddItems(new session)", setup: func(*testing.T, *Session) {},
		do:    func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) },
		match: scriptMatch(appendScript, pythonAppendScript)},
	{name: "AddItems(TTL)", ttl: true, setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) }},
	{name: "AddItemsOnce", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, err := s.AddItemsOnce(ctx, "op-1", lostBatch)
			return err
		}},
	{name: "PopItem", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, _, err := s.PopItem(ctx)
			return err
		},
		check: checkPopRecovered},
	{name: "PopItem(second script)", setup: func(t *testing.T, s *Session) {
		lostSetupBase(t, s)
		require.NoError(t, s.AddItems(context.Background(), []session.Item{lostUnsure}))
	},
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, _, err := s.PopItem(ctx)
			return err
		},
		match: scriptMatch(popIfScript, nativePopIfScript),
		check: checkPopRecovered},
	{name: "Clear", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.Clear(ctx) }},
	{name: "ReplaceItems", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.ReplaceItems(ctx, lostBatch) }},
	{name: "ReplaceItemsIf", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, v string) error {
			return s.ReplaceItemsIf(ctx, v, lostBatch)
		}},
	{name: "SaveCheckpoint", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, err := s.SaveCheckpoint(ctx, "c", []byte(`{"v":2}`), 1)
			return err
		}},
	{name: "AppendWithCheckpoint", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, err := s.AppendWithCheckpoint(ctx, lostBatch, "c", []byte(`{"v":2}`), 1)
			return err
		}},
	// The handle has written to the session before: the native commit is
	// the fenced MULTI/EXEC (commitFenced), not the commit script.
	{name: "AppendWithCheckpoint(fenced)", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			s.listed.Store(true)
			_, err := s.AppendWithCheckpoint(ctx, lostBatch, "c", []byte(`{"v":2}`), 1)
			return err
		}},
	{name: "DeleteCheckpoint", setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			return s.DeleteCheckpoint(ctx, "c", 1)
		}},
	{name: "RemoveSession", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, s *Session, _ string) error {
			return st.RemoveSession(ctx, s.SessionID())
		}},
	{name: "AddItems(WaitReplicas)", wait: true, setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) }},
	{name: "PopItem(WaitReplicas)", wait: true, setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, _, err := s.PopItem(ctx)
			return err
		},
		check: checkPopRecovered},
	{name: "AppendWithCheckpoint(WaitReplicas)", wait: true, setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			_, err := s.AppendWithCheckpoint(ctx, lostBatch, "c", []byte(`{"v":2}`), 1)
			return err
		}},
	{name: "AppendWithCheckpoint(fenced,TTL)", ttl: true, setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			s.listed.Store(true)
			_, err := s.AppendWithCheckpoint(ctx, lostBatch, "c", []byte(`{"v":2}`), 1)
			return err
		}},
	{name: "AppendWithCheckpoint(fenced,WaitReplicas)", wait: true, setup: lostSetupBase,
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error {
			s.listed.Store(true)
			_, err := s.AppendWithCheckpoint(ctx, lostBatch, "c", []byte(`{"v":2}`), 1)
			return err
		}},
	{name: "Touch", ttl: true, setup: func(t *testing.T, s *Session) {
		lostSetupBase(t, s)
		for _, k := range s.all {
			require.NoError(t, s.st.client.PExpire(context.Background(), k, lostTouchSet).Err())
		}
	},
		do: func(ctx context.Context, _ *Store, s *Session, _ string) error { return s.Touch(ctx) }},
}

// lostRed skips the checks of what a caller can do after the lost reply
// (RecoverPop), to count the outcomes of code that has none.
var lostRed = flag.Bool("lostreply.countonly", false, "TestLostReplyOutcome: count outcomes only")

// lostReps is how often each write runs per deployment and layout.
const lostReps = 3

// TestLostReplyOutcome loses the reply of every write, lostReps times, on
// every deployment the suite can start (standalone, sentinel, cluster)
// and both layouts (the Python layout is refused on a cluster), and
// fails on any write that took effect and reported a plain error.
func TestLostReplyOutcome(t *testing.T) {
	table := lostreply.NewTable("deployment", "layout", "operation")
	t.Cleanup(func() { t.Logf("lost replies:\n%s", table) })
	for _, dep := range []string{"standalone", "sentinel", "cluster"} {
		t.Run(dep, func(t *testing.T) {
			d := newLostDeployment(t, dep)
			for _, layout := range []Layout{LayoutNative, LayoutPython} {
				if layout == LayoutPython && d.sharded {
					continue
				}
				lname := "native"
				if layout == LayoutPython {
					lname = "python"
				}
				t.Run(lname, func(t *testing.T) {
					runLostReplies(t, d, layout, lname, table)
				})
			}
		})
	}
}

func runLostReplies(t *testing.T, d *lostDeployment, layout Layout, lname string, table *lostreply.Table) {
	ctx := context.Background()
	opts := Options{KeyPrefix: uniquePrefix(t), Layout: layout}
	ttlOpts := opts
	ttlOpts.TTL = lostStoreTTL
	waitOpts := opts
	waitOpts.WaitReplicas, waitOpts.WaitTimeout = 1, 5*time.Second
	type kind struct{ ttl, wait bool }
	stores := map[kind][2]*Store{ // {proxied, direct}
		{}:          {newStore(t, d.proxied, opts), newStore(t, d.direct, opts)},
		{ttl: true}: {newStore(t, d.proxied, ttlOpts), newStore(t, d.direct, ttlOpts)},
	}
	if d.name == "sentinel" {
		stores[kind{wait: true}] = [2]*Store{newStore(t, d.proxied, waitOpts), newStore(t, d.direct, opts)}
	}
	// No NOSCRIPT round trip: the lost reply is the script's own.
	require.NoError(t, stores[kind{}][1].LoadScripts(ctx))
	for _, op := range lostOps {
		pair, ok := stores[kind{ttl: op.ttl, wait: op.wait}]
		if !ok {
			continue
		}
		t.Run(strings.ReplaceAll(op.name, " ", "_"), func(t *testing.T) {
			for rep := range lostReps {
				st, direct := pair[0], pair[1]
				id := fmt.Sprintf("lost-%s-%d-%s", strings.NewReplacer(" ", "", "(", "", ")", "").Replace(op.name), rep, uniquePrefix(t)[len("agents:test:"):])
				ds, err := direct.Session(id)
				require.NoError(t, err)
				op.setup(t, ds)
				version, err := ds.HistoryVersion(ctx)
				require.NoError(t, err)
				before := snapshot(t, d.direct, ds)
				s, err := st.Session(id)
				require.NoError(t, err)
				match := func(req []byte) bool { return bytes.Contains(req, []byte(id)) }
				if op.match != nil {
					match = op.match(s)
				}
				n0 := d.arm(match)
				callErr := op.do(ctx, st, s, version)
				injected := d.disarm() - n0
				after := snapshot(t, d.direct, ds)
				o := lostreply.Classify(!before.equal(after), injected == 1, callErr)
				table.Add(d.name+"|"+lname+"|"+op.name, o)
				if o == lostreply.TookUnknown && op.check != nil && !*lostRed {
					op.check(t, s, before, callErr)
				}
				// A write whose reply is lost cannot report success here.
				if o.Bad() || o == lostreply.TookNil {
					t.Errorf("%s, %s layout, %s (rep %d): %s (faults injected: %d), error: %v",
						d.name, lname, op.name, rep, o, injected, callErr)
				}
				_ = direct.RemoveSession(ctx, id)
			}
		})
	}
}

// TestOutcomeNotSent: a write that provably did not happen reports a
// plain error (no session.ErrOutcomeUnknown) and wrote nothing: a client
// whose dial is refused, a closed client, and the server's error reply
// (WRONGTYPE: each script fails before its first write).
func TestOutcomeNotSent(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: dials are refused
	// A pool as big as the dials it fails: a pool whose every slot failed to
	// dial starts a goroutine that redials once a second (pool.tryDial).
	refused := goredis.NewClient(&goredis.Options{Addr: dead, MaxRetries: -1, DialerRetries: 1, PoolSize: 1000})
	t.Cleanup(func() { _ = refused.Close() })
	closed := goredis.NewClient(&goredis.Options{Addr: dead})
	require.NoError(t, closed.Close())
	live := standaloneClient(t)
	for _, layout := range []Layout{LayoutNative, LayoutPython} {
		opts := Options{KeyPrefix: uniquePrefix(t), Layout: layout}
		ref := newStore(t, live, opts)
		for name, c := range map[string]goredis.UniversalClient{"dial refused": refused, "client closed": closed, "WRONGTYPE": live} {
			st := newStore(t, c, opts)
			for _, op := range lostOps {
				if op.ttl || op.wait || (op.name == "RemoveSession" || op.name == "Clear") && name == "WRONGTYPE" {
					continue // a TTL Store; DEL deletes keys of any type
				}
				id := fmt.Sprintf("notsent-%d-%s-%s", layout, strings.ReplaceAll(name, " ", ""), strings.NewReplacer(" ", "", "(", "", ")", "").Replace(op.name))
				rs, err := ref.Session(id)
				require.NoError(t, err)
				if name == "WRONGTYPE" {
					// Every key of the session a string: every write is refused.
					for _, k := range rs.all {
						require.NoError(t, live.Set(ctx, k, "x", 0).Err())
					}
				}
				before := snapshotAny(t, live, rs)
				s, err := st.Session(id)
				require.NoError(t, err)
				callErr := op.do(ctx, st, s, "0:da39a3ee5e6b4b0d3255bfef95601890afd80709")
				require.Error(t, callErr, "%s: %s", name, op.name)
				require.NotErrorIs(t, callErr, session.ErrOutcomeUnknown, "%s: %s: nothing was sent or the server refused", name, op.name)
				require.Equal(t, before, snapshotAny(t, live, rs), "%s: %s wrote nothing", name, op.name)
				require.NoError(t, live.Del(ctx, rs.all...).Err())
			}
		}
	}
}

// snapshotAny dumps every key of the session, whatever its type.
func snapshotAny(t *testing.T, c goredis.UniversalClient, s *Session) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range s.all {
		d, err := c.Dump(context.Background(), k).Result()
		if errors.Is(err, goredis.Nil) {
			continue
		}
		require.NoError(t, err)
		out[k] = d
	}
	return out
}

// TestPopToken: a token pops at most one item; RecoverPop of a token that
// popped nothing settles it, and a pop with it then pops nothing.
func TestPopToken(t *testing.T) {
	ctx := context.Background()
	for _, layout := range []Layout{LayoutNative, LayoutPython} {
		st := newStore(t, standaloneClient(t), Options{KeyPrefix: uniquePrefix(t), Layout: layout})
		s, err := st.Session("tok")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, lostBase))

		tok := NewPopToken()
		for range 3 {
			it, ok, err := s.PopItemWithToken(ctx, tok)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, lostBase[1].String(), it.String())
		}
		it, ok, err := s.RecoverPop(ctx, tok)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, lostBase[1].String(), it.String())
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1, "one item popped for the token, however often")

		fenced := NewPopToken()
		_, ok, err = s.RecoverPop(ctx, fenced)
		require.NoError(t, err)
		require.False(t, ok, "the token popped nothing")
		_, ok, err = s.PopItemWithToken(ctx, fenced)
		require.ErrorIs(t, err, ErrPopSettled)
		require.False(t, ok)
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1, "a settled token pops nothing")

		_, _, err = s.RecoverPop(ctx, "checkpoints")
		require.ErrorIs(t, err, ErrInvalidPopToken)
		_, _, err = s.PopItemWithToken(ctx, "x")
		require.ErrorIs(t, err, ErrInvalidPopToken)

		// The record keys are the layout's own, and expire.
		n, err := st.client.PTTL(ctx, s.popRecordKey(tok)).Result()
		require.NoError(t, err)
		require.Positive(t, n)
		require.NoError(t, st.RemoveSession(ctx, "tok"))
	}
}
