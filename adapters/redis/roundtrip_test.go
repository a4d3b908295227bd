package redis

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// tripCounter is a go-redis hook that records every command and pipeline
// sent: each Process call and each pipeline is one round trip.
type tripCounter struct {
	mu    sync.Mutex
	trips []string // one entry per round trip: the command names sent
}

func (c *tripCounter) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *tripCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		names := make([]string, len(cmds))
		for i, cmd := range cmds {
			names[i] = cmd.Name()
		}
		c.add("pipeline(" + strings.Join(names, ",") + ")")
		return next(ctx, cmds)
	}
}

func (c *tripCounter) add(name string) {
	c.mu.Lock()
	c.trips = append(c.trips, name)
	c.mu.Unlock()
}

// during returns the round trips that fn made.
func (c *tripCounter) during(fn func()) []string {
	c.mu.Lock()
	c.trips = nil
	c.mu.Unlock()
	fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.trips...)
}

// countedClients returns a standalone client with the counter on it, and a
// cluster client with the counter on every node client, so that
// redirections would be counted too.
func countedClients(t *testing.T) map[string]struct {
	client  goredis.UniversalClient
	counter *tripCounter
} {
	out := map[string]struct {
		client  goredis.UniversalClient
		counter *tripCounter
	}{}
	sc := &tripCounter{}
	c := standaloneClient(t)
	c.AddHook(sc)
	out["standalone"] = struct {
		client  goredis.UniversalClient
		counter *tripCounter
	}{c, sc}
	cc := &tripCounter{}
	cl := clusterClient(t)
	cl.OnNewNode(func(node *goredis.Client) { node.AddHook(cc) })
	out["cluster"] = struct {
		client  goredis.UniversalClient
		counter *tripCounter
	}{cl, cc}
	return out
}

func TestRoundTrips(t *testing.T) {
	for name, cc := range countedClients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			plain := newStore(t, cc.client, Options{KeyPrefix: uniquePrefix(t)})
			ttl := newStore(t, cc.client, Options{KeyPrefix: uniquePrefix(t), TTL: time.Minute, RefreshOnRead: true})
			require.NoError(t, plain.LoadScripts(ctx), "scripts cached on every master")
			for _, st := range []*Store{plain, ttl} {
				// Warm up: connections dialled (for commands and pipelines, on
				// the nodes the sessions below live on), cluster slots loaded.
				for _, id := range []string{"warm", "rt"} {
					s, err := st.Session(id)
					require.NoError(t, err)
					require.NoError(t, s.AddItems(ctx, conformance.Numbered("w", 2)))
					require.NoError(t, s.ReplaceItems(ctx, conformance.Numbered("w", 2)))
					_, _, err = s.PopItem(ctx)
					require.NoError(t, err)
					_, err = s.LatestItems(ctx, 1)
					require.NoError(t, err)
					require.NoError(t, s.Touch(ctx))
					require.NoError(t, s.Clear(ctx))
				}
			}
			s, err := plain.Session("rt")
			require.NoError(t, err)
			ts, err := ttl.Session("rt")
			require.NoError(t, err)
			batch := conformance.Numbered("b", 20)
			for _, tc := range []struct {
				op   string
				fn   func() error
				want []string
			}{
				{"append to a new session (RPUSHX finds no list, the script creates it)", func() error { return s.AddItems(ctx, batch) }, []string{"rpushx", "evalsha"}},
				{"append again", func() error { return s.AddItems(ctx, batch) }, []string{"rpushx"}},
				{"latest-N", func() error { _, err := s.LatestItems(ctx, 5); return err }, []string{"lrange"}},
				{"latest-N beyond the history", func() error { _, err := s.LatestItems(ctx, 1000); return err }, []string{"lrange"}},
				{"items", func() error { _, err := s.Items(ctx); return err }, []string{"lrange"}},
				{"pop", func() error { _, _, err := s.PopItem(ctx); return err }, []string{"evalsha"}},
				{"replace", func() error { return s.ReplaceItems(ctx, batch[:3]) }, []string{"evalsha"}},
				{"clear", func() error { return s.Clear(ctx) }, []string{"del"}},
				{"pop empty", func() error { _, _, err := s.PopItem(ctx); return err }, []string{"evalsha"}},
				{"append 10000 items to a new session (several RPUSH chunks in the script)", func() error {
					return s.AddItems(ctx, conformance.Numbered("big", 10000))
				}, []string{"rpushx", "evalsha"}},
				{"append 10000 items again (one RPUSHX)", func() error {
					return s.AddItems(ctx, conformance.Numbered("big2", 10000))
				}, []string{"rpushx"}},
				{"ttl append to a new session", func() error { return ts.AddItems(ctx, batch) }, []string{"pipeline(multi,rpushx,pexpire,pexpire,pexpire,exec)", "evalsha"}},
				{"ttl append again", func() error { return ts.AddItems(ctx, batch) }, []string{"pipeline(multi,rpushx,pexpire,pexpire,pexpire,exec)"}},
				{"ttl latest-N with refresh", func() error { _, err := ts.LatestItems(ctx, 5); return err }, []string{"evalsha"}},
				{"ttl items with refresh", func() error { _, err := ts.Items(ctx); return err }, []string{"evalsha"}},
				{"ttl pop", func() error { _, _, err := ts.PopItem(ctx); return err }, []string{"evalsha"}},
				{"ttl replace", func() error { return ts.ReplaceItems(ctx, batch) }, []string{"evalsha"}},
				{"touch", func() error { return ts.Touch(ctx) }, []string{"evalsha"}},
				{"expires-in", func() error { _, _, err := ts.ExpiresIn(ctx); return err }, []string{"pttl"}},
				{"ttl clear", func() error { return ts.Clear(ctx) }, []string{"del"}},
			} {
				var err error
				got := cc.counter.during(func() { err = tc.fn() })
				require.NoError(t, err, tc.op)
				assert.Equal(t, tc.want, got, "%s: round trips", tc.op)
				t.Logf("%-60s %d round trip(s): %v", tc.op, len(got), got)
			}
			all, err := s.Items(ctx)
			require.NoError(t, err)
			require.Len(t, all, 20000)
		})
	}
}

// TestRoundTripsCorruptWindow: a corrupt record among the newest n costs
// exactly one more read (the window doubles), and the result is right.
func TestRoundTripsCorruptWindow(t *testing.T) {
	ctx := context.Background()
	counter := &tripCounter{}
	c := standaloneClient(t)
	c.AddHook(counter)
	var col driver.CorruptLog
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), OnCorrupt: col.Handler()})
	s, err := st.Session("cw")
	require.NoError(t, err)
	items := conformance.Numbered("i", 10)
	require.NoError(t, s.AddItems(ctx, items))
	require.NoError(t, c.RPush(ctx, s.Keys()[0], "garbage").Err())
	require.NoError(t, s.AddItems(ctx, conformance.Numbered("j", 2)))
	var got []session.Item
	trips := counter.during(func() { got, err = s.LatestItems(ctx, 4) })
	require.NoError(t, err)
	require.Equal(t, []string{"lrange", "lrange"}, trips)
	want := append(append([]session.Item{}, items[8:]...), conformance.Numbered("j", 2)...)
	require.Equal(t, texts(want), texts(got))
	reps := col.Reports("cw")
	require.Len(t, reps, 1, "reported once, not once per window")
	assert.Equal(t, "garbage", string(reps[0].Raw))
	assert.Equal(t, "index -3 (from the end)", reps[0].Position)
}

// TestNoScriptFallback: after SCRIPT FLUSH the first append to a new
// session costs RPUSHX (no list: nothing written), EVALSHA (answered
// NOSCRIPT, nothing run) plus EVAL, and lands exactly once.
func TestNoScriptFallback(t *testing.T) {
	ctx := context.Background()
	counter := &tripCounter{}
	srv := privateServer(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	c.AddHook(counter)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("ns")
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	var aerr error
	trips := counter.during(func() { aerr = s.AddItems(ctx, conformance.Numbered("n", 3)) })
	require.NoError(t, aerr)
	require.Equal(t, []string{"rpushx", "evalsha", "eval"}, trips)
	trips = counter.during(func() { aerr = s.AddItems(ctx, conformance.Numbered("m", 1)) })
	require.NoError(t, aerr)
	require.Equal(t, []string{"rpushx"}, trips, "the list exists: one RPUSHX")
	s2, err := st.Session("ns2")
	require.NoError(t, err)
	trips = counter.during(func() { aerr = s2.AddItems(ctx, conformance.Numbered("o", 1)) })
	require.NoError(t, aerr)
	require.Equal(t, []string{"rpushx", "evalsha"}, trips, "EVAL cached the script")
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(append(conformance.Numbered("n", 3), conformance.Numbered("m", 1)...)), texts(got))
}

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// TestAllocsFlatInHistory: LatestItems(50) and PopItem allocate as much on
// a history of 20k items as on one of 1k.
func TestAllocsFlatInHistory(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	measure := func(size int) (latest, pop float64) {
		s, err := st.Session("h" + strconv.Itoa(size))
		require.NoError(t, err)
		batch := conformance.Numbered("h", 1000)
		for n := 0; n < size; n += len(batch) {
			require.NoError(t, s.AddItems(ctx, batch))
		}
		latest = testing.AllocsPerRun(20, func() {
			got, err := s.LatestItems(ctx, 50)
			require.NoError(t, err)
			require.Len(t, got, 50)
		})
		pop = testing.AllocsPerRun(20, func() {
			_, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
		})
		return latest, pop
	}
	l1, p1 := measure(1_000)
	l2, p2 := measure(20_000)
	t.Logf("allocs per op: latest-50 %.0f (1k) / %.0f (20k), pop %.0f / %.0f", l1, l2, p1, p2)
	require.Equal(t, l1, l2, "latest-50")
	require.Equal(t, p1, p2, "pop")
}
