package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
)

// heldSession returns a handle on a new session of st whose next commit
// runs on a held connection, and the checkpoint "run"'s version: an
// append, then two commits in a row (the second starts the hold).
func heldSession(t testing.TB, st *Store, id string) (*Session, int64) {
	t.Helper()
	ctx := context.Background()
	s, err := st.Session(id)
	require.NoError(t, err)
	t.Cleanup(func() {
		s.hold.mu.Lock()
		if s.hold.h != nil {
			s.release() // for the Store's next test: it holds a few at most
		}
		s.hold.mu.Unlock()
		_ = st.RemoveSession(context.Background(), id)
	})
	require.NoError(t, s.AddItems(ctx, conformance.Numbered("start", 1)))
	var v int64
	for i := range 2 {
		v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("arm"+strconv.Itoa(i), 2), "run", []byte(`{"n":0}`), v)
		require.NoError(t, err)
	}
	requireHeld(t, s, true)
	return s, v
}

// requireHeld fails unless s holds a connection (want) or holds none.
func requireHeld(t testing.TB, s *Session, want bool) {
	t.Helper()
	s.hold.mu.Lock()
	got := s.hold.h != nil
	s.hold.mu.Unlock()
	require.Equal(t, want, got, "session %q holds a connection", s.id)
}

// contents returns the items' contents ("start-0", ...), for comparing
// histories.
func contents(t *testing.T, s *Session) []string {
	t.Helper()
	items, err := s.Items(context.Background())
	require.NoError(t, err)
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it.StringField("content")
	}
	return out
}

// TestHeldCommit: back-to-back commits on one handle land on a held
// connection and leave what the fenced commit leaves: the same items in
// the same order, the same checkpoint and version, with or without a TTL,
// on standalone and cluster.
func TestHeldCommit(t *testing.T) {
	for name, client := range bothClients {
		for _, ttl := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%s/ttl=%v", name, ttl), func(t *testing.T) {
				ctx := context.Background()
				c := client(t)
				held := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl})
				plain := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl, HeldConns: -1})
				var sessions [2]*Session
				var versions [2]int64
				for i, st := range []*Store{held, plain} {
					s, err := st.Session("h")
					require.NoError(t, err)
					t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "h") })
					require.NoError(t, s.AddItems(ctx, conformance.Numbered("start", 1)))
					for n := range 6 {
						doc := []byte(fmt.Sprintf(`{"n":%d}`, n))
						versions[i], err = s.AppendWithCheckpoint(ctx, conformance.Numbered("t"+strconv.Itoa(n), 3), "run", doc, versions[i])
						require.NoError(t, err)
					}
					sessions[i] = s
				}
				require.EqualValues(t, 4, held.heldCommits.Load(), "commit 1 takes the usual way, 2 too and then holds a connection, 3 to 6 land on it")
				require.Zero(t, plain.heldCommits.Load())
				require.Equal(t, versions[1], versions[0])
				require.Equal(t, contents(t, sessions[1]), contents(t, sessions[0]))
				for i, s := range sessions {
					doc, v, err := s.LoadCheckpoint(ctx, "run")
					require.NoError(t, err)
					require.Equal(t, `{"n":5}`, string(doc))
					require.Equal(t, versions[i], v)
				}
				if ttl > 0 {
					requireExpireTogether(t, c, sessions[0], ttl, 0, "after a held commit")
				}
			})
		}
	}
}

// TestHeldCommitBesideOtherWriters: whatever another handle does between
// two commits (append, save or delete the checkpoint, delete the history,
// turn a key into another type), the held commit does what the fenced
// commit would: it lands after the other's items, or refuses with
// session.ErrCheckpointConflict having written nothing, or gets the
// key type's error having written nothing.
func TestHeldCommitBesideOtherWriters(t *testing.T) {
	cases := []struct {
		name  string
		other func(ctx context.Context, c goredis.UniversalClient, o *Session, v int64) error
		// conflict: the commit must refuse, writing nothing; otherwise it
		// must land after the history other leaves.
		conflict, fails bool
	}{
		{name: "append", other: func(ctx context.Context, _ goredis.UniversalClient, o *Session, _ int64) error {
			return o.AddItems(ctx, conformance.Numbered("other", 2))
		}},
		{name: "save", conflict: true, other: func(ctx context.Context, _ goredis.UniversalClient, o *Session, v int64) error {
			_, err := o.SaveCheckpoint(ctx, "run", []byte(`{"other":1}`), v)
			return err
		}},
		{name: "save another checkpoint", other: func(ctx context.Context, _ goredis.UniversalClient, o *Session, _ int64) error {
			_, err := o.SaveCheckpoint(ctx, "side", []byte(`{"side":1}`), 0)
			return err
		}},
		{name: "delete the checkpoint", conflict: true, other: func(ctx context.Context, _ goredis.UniversalClient, o *Session, v int64) error {
			return o.DeleteCheckpoint(ctx, "run", v)
		}},
		{name: "clear", other: func(ctx context.Context, _ goredis.UniversalClient, o *Session, _ int64) error {
			return o.Clear(ctx)
		}},
		{name: "replace", other: func(ctx context.Context, _ goredis.UniversalClient, o *Session, _ int64) error {
			return o.ReplaceItems(ctx, conformance.Numbered("replaced", 1))
		}},
		{name: "list becomes a string", fails: true, other: func(ctx context.Context, c goredis.UniversalClient, o *Session, _ int64) error {
			if err := c.Del(ctx, o.keys[0]).Err(); err != nil {
				return err
			}
			return c.Set(ctx, o.keys[0], "x", 0).Err()
		}},
	}
	for name, client := range bothClients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := client(t)
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
			for _, tc := range cases {
				t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
					id := "beside-" + strings.ReplaceAll(tc.name, " ", "-")
					s, v := heldSession(t, st, id)
					o, err := st.Session(id)
					require.NoError(t, err)
					require.NoError(t, tc.other(ctx, c, o, v))
					before := dumpKeys(t, c, sessionAllKeys(s))
					var want []string
					if !tc.fails {
						want = append(contents(t, o), "mine-0", "mine-1")
					}
					got, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("mine", 2), "run", []byte(`{"n":9}`), v)
					// A commit that lands holds its connection again; the
					// others let it go.
					requireHeld(t, s, err == nil)
					switch {
					case tc.conflict:
						require.ErrorIs(t, err, session.ErrCheckpointConflict)
						require.Equal(t, before, dumpKeys(t, c, sessionAllKeys(s)), "a refused commit writes nothing")
					case tc.fails:
						require.Error(t, err)
						require.NotErrorIs(t, err, session.ErrOutcomeUnknown)
						require.Equal(t, before, dumpKeys(t, c, sessionAllKeys(s)), "a failed commit writes nothing")
					default:
						require.NoError(t, err)
						require.Equal(t, v+1, got)
						require.Equal(t, want, contents(t, s))
						doc, gv, err := s.LoadCheckpoint(ctx, "run")
						require.NoError(t, err)
						require.Equal(t, `{"n":9}`, string(doc))
						require.Equal(t, got, gv)
					}
				})
			}
			require.Zero(t, st.heldCommits.Load(), "every commit above found its keys changed under the WATCH")
		})
	}
}

// TestHeldConnectionsLetGo: a held connection is closed (never handed
// back to the pool, WATCH and all) after the idle window, on Close, and
// when the caller's version is not the watched one; a Store holds at most
// HeldConns, and none with a negative HeldConns.
func TestHeldConnectionsLetGo(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	clientGone := func(t *testing.T, id int64) {
		t.Helper()
		list, err := c.ClientList(ctx).Result()
		require.NoError(t, err)
		require.NotContains(t, list, "id="+strconv.FormatInt(id, 10)+" ", "the held connection was closed")
	}
	heldID := func(s *Session) int64 {
		s.hold.mu.Lock()
		defer s.hold.mu.Unlock()
		id, err := s.hold.h.conn.ClientID(ctx).Result()
		require.NoError(t, err)
		return id
	}

	t.Run("idle", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
		s, _ := heldSession(t, st, "idle")
		id := heldID(s)
		require.Eventually(t, func() bool {
			s.hold.mu.Lock()
			defer s.hold.mu.Unlock()
			return s.hold.h == nil
		}, 10*heldIdle, heldIdle/10)
		clientGone(t, id)
		require.Empty(t, st.held.close())
	})
	t.Run("close", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
		s, v := heldSession(t, st, "close")
		id := heldID(s)
		require.NoError(t, st.Close())
		requireHeld(t, s, false)
		clientGone(t, id)
		_, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("late", 1), "run", []byte(`{}`), v)
		require.ErrorIs(t, err, session.ErrClosed)
	})
	t.Run("stale version", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
		s, v := heldSession(t, st, "stale")
		id := heldID(s)
		_, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("late", 1), "run", []byte(`{}`), v-1)
		require.ErrorIs(t, err, session.ErrCheckpointConflict)
		requireHeld(t, s, false)
		clientGone(t, id)
	})
	t.Run("cap", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), HeldConns: 2})
		var held int
		for i := range 5 {
			s, err := st.Session("cap-" + strconv.Itoa(i))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.RemoveSession(context.Background(), s.id) })
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("start", 1)))
			var v int64
			for n := range 3 {
				v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("c"+strconv.Itoa(n), 1), "run", []byte(`{}`), v)
				require.NoError(t, err)
			}
			s.hold.mu.Lock()
			if s.hold.h != nil {
				held++
			}
			s.hold.mu.Unlock()
		}
		require.Equal(t, 2, held)
		require.Len(t, st.held.close(), 2)
	})
	t.Run("none", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), HeldConns: -1})
		require.Equal(t, -1, st.Options().HeldConns, "Options keeps what the caller chose")
		s, err := st.Session("none")
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "none") })
		require.NoError(t, s.AddItems(ctx, conformance.Numbered("start", 1)))
		var v int64
		for n := range 4 {
			v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("c"+strconv.Itoa(n), 1), "run", []byte(`{}`), v)
			require.NoError(t, err)
		}
		requireHeld(t, s, false)
		require.Zero(t, st.heldCommits.Load())
	})
}

// TestHeldCommitsOfOneHandleAtOnce: goroutines committing through one
// handle, one of them at a time on the held connection and the others the
// usual way, with another handle appending meanwhile: every commit that
// reports success landed once, every refused one wrote nothing, and the
// versions count the successes.
func TestHeldCommitsOfOneHandleAtOnce(t *testing.T) {
	ctx := context.Background()
	for name, client := range bothClients {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
			s, v0 := heldSession(t, st, "atonce")
			o, err := st.Session("atonce")
			require.NoError(t, err)
			var mu sync.Mutex
			v, landed := v0, map[string]bool{}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := range 25 {
						tag := fmt.Sprintf("g%d-%d", g, n)
						mu.Lock()
						cur := v
						mu.Unlock()
						got, err := s.AppendWithCheckpoint(ctx, conformance.Numbered(tag, 2), "run", []byte(`{}`), cur)
						if err != nil {
							if !errors.Is(err, session.ErrCheckpointConflict) {
								t.Errorf("%s: %v", tag, err)
							}
							continue
						}
						mu.Lock()
						landed[tag] = true
						if got > v {
							v = got
						}
						mu.Unlock()
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range 25 {
					if err := o.AddItems(ctx, conformance.Numbered(fmt.Sprintf("o-%d", n), 1)); err != nil {
						t.Error(err)
					}
				}
			}()
			wg.Wait()
			_, stored, err := s.LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.Equal(t, v0+int64(len(landed)), stored, "one version per commit that landed")
			count := map[string]int{}
			for _, x := range contents(t, s) {
				if i := strings.LastIndexByte(x, '-'); i > 0 {
					count[x[:i]]++
				}
			}
			for tag := range landed {
				require.Equal(t, 2, count[tag], "%s: its two items, once", tag)
				delete(count, tag)
			}
			for tag, n := range count {
				if strings.HasPrefix(tag, "g") {
					t.Errorf("%s: %d items of a commit that reported a conflict", tag, n)
				}
			}
			t.Logf("%d commits landed, %d on the held connection", len(landed), st.heldCommits.Load())
		})
	}
}

// TestHeldCommitLostReply: a held commit whose reply is lost (the proxy
// lets the request through, waits for the server's reply and closes the
// connection) is an error wrapping session.ErrOutcomeUnknown, never a
// plain error; the connection is let go, and the next commit, with the
// version that landed, takes the usual way.
func TestHeldCommitLostReply(t *testing.T) {
	ctx := context.Background()
	for _, dep := range []string{"standalone", "cluster"} {
		t.Run(dep, func(t *testing.T) {
			d := newLostDeployment(t, dep)
			prefix := uniquePrefix(t)
			st := newStore(t, d.proxied, Options{KeyPrefix: prefix})
			direct := newStore(t, d.direct, Options{KeyPrefix: prefix})
			s, v := heldSession(t, st, "lost")
			ds, err := direct.Session("lost")
			require.NoError(t, err)
			before := len(contents(t, ds))
			n0 := d.arm(func(req []byte) bool {
				return bytes.Contains(req, []byte("\r\nexec\r\n")) && bytes.Contains(req, []byte("\r\nwatch\r\n"))
			})
			_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("lost", 2), "run", []byte(`{"n":1}`), v)
			require.EqualValues(t, 1, d.disarm()-n0, "the held commit's reply was lost")
			require.ErrorIs(t, err, session.ErrOutcomeUnknown)
			requireHeld(t, s, false)
			require.Zero(t, st.heldResends.Load(), "the resend found the version moved on")
			// It landed, once.
			doc, got, err := ds.LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.Equal(t, v+1, got)
			require.Equal(t, `{"n":1}`, string(doc))
			after := contents(t, ds)
			require.Equal(t, []string{"lost-0", "lost-1"}, after[before:])
			next, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("next", 1), "run", []byte(`{"n":2}`), got)
			require.NoError(t, err)
			require.Equal(t, got+1, next)
		})
	}
}

// TestHeldCap: a Store holds at most Options.HeldConns connections and a
// quarter of its client's pool, none on a Ring.
func TestHeldCap(t *testing.T) {
	for _, tc := range []struct {
		client goredis.UniversalClient
		want   int
		cap    int
	}{
		{goredis.NewClient(&goredis.Options{PoolSize: 40}), 0, DefaultHeldConns},
		{goredis.NewClient(&goredis.Options{PoolSize: 40}), 7, 7},
		{goredis.NewClient(&goredis.Options{PoolSize: 12}), 7, 3},
		{goredis.NewClient(&goredis.Options{PoolSize: 3}), 0, 0},
		{goredis.NewClient(&goredis.Options{PoolSize: 40}), -1, 0},
		{goredis.NewClusterClient(&goredis.ClusterOptions{PoolSize: 8}), 0, 2},
		{goredis.NewRing(&goredis.RingOptions{PoolSize: 40}), 0, 0},
	} {
		st := newStore(t, tc.client, Options{HeldConns: tc.want})
		require.Equal(t, tc.cap, st.heldCap, "%T, HeldConns %d", tc.client, tc.want)
		_ = tc.client.Close()
	}
}

// TestHeldConnectionKilled: when the server closes the held connection
// (CLIENT KILL here; a restart or a failover alike), the next commit finds
// it dead after sending, and its resend through the pool is the commit:
// it lands once, with or without a TTL, on standalone and cluster.
func TestHeldConnectionKilled(t *testing.T) {
	ctx := context.Background()
	for dep, mk := range bothClients {
		for _, ttl := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%s/ttl=%v", dep, ttl), func(t *testing.T) {
				c := mk(t)
				st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl})
				s, v := heldSession(t, st, "killed")
				before := contents(t, s)
				killHeld(t, s)
				got, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("late", 2), "run", []byte(`{"n":1}`), v)
				require.NoError(t, err)
				require.Equal(t, v+1, got)
				require.EqualValues(t, 1, st.heldResends.Load())
				requireHeld(t, s, false)
				require.Equal(t, append(before, "late-0", "late-1"), contents(t, s), "landed once")
				doc, stored, err := s.LoadCheckpoint(ctx, "run")
				require.NoError(t, err)
				require.Equal(t, v+1, stored)
				require.Equal(t, `{"n":1}`, string(doc))
				if ttl > 0 {
					for _, k := range sessionAllKeys(s) {
						require.Greater(t, c.PTTL(ctx, k).Val(), ttl-time.Minute, "the resend restarted %s's expiry", k)
					}
				}
				next, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("next", 1), "run", []byte(`{"n":2}`), got)
				require.NoError(t, err)
				require.Equal(t, got+1, next)
			})
		}
	}
}

// killHeld closes s's held connection from the server's side.
func killHeld(t *testing.T, s *Session) {
	t.Helper()
	ctx := context.Background()
	s.hold.mu.Lock()
	id, err := s.hold.h.conn.ClientID(ctx).Result()
	s.hold.mu.Unlock()
	require.NoError(t, err)
	node := s.st.primaryFor(ctx, s.keys[0])
	require.NoError(t, node.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err())
}

// TestHeldResendRefused: the resend of a held commit whose connection
// died lands only where the version and the list's length are the ones
// the held commit was armed with; where another writer moved either, the
// resend writes nothing and the commit's outcome is reported unknown
// (from the store alone it cannot be told whether the held commit ran
// before the other write).
func TestHeldResendRefused(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	prefix := uniquePrefix(t)
	st := newStore(t, c, Options{KeyPrefix: prefix})
	other := newStore(t, c, Options{KeyPrefix: prefix, HeldConns: -1})
	for name, write := range map[string]func(o *Session, v int64) error{
		"a commit": func(o *Session, v int64) error {
			_, err := o.AppendWithCheckpoint(ctx, conformance.Numbered("other", 1), "run", []byte(`{"other":1}`), v)
			return err
		},
		"an append": func(o *Session, _ int64) error { return o.AddItems(ctx, conformance.Numbered("other", 1)) },
	} {
		t.Run(name, func(t *testing.T) {
			id := strings.ReplaceAll(name, " ", "-")
			s, v := heldSession(t, st, id)
			o, err := other.Session(id)
			require.NoError(t, err)
			killHeld(t, s)
			require.NoError(t, write(o, v))
			after := dumpKeys(t, c, sessionAllKeys(s))
			_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("late", 1), "run", []byte(`{"n":1}`), v)
			require.ErrorIs(t, err, session.ErrOutcomeUnknown)
			require.Equal(t, after, dumpKeys(t, c, sessionAllKeys(s)), "the resend wrote nothing")
		})
	}
}

// TestHeldResendGuard: the resend's fence refuses a list of another
// length than the one armed, even at the armed version, writing nothing;
// at both it lands. (A held commit that ran and was then undone by others,
// the version and the list both put back, is the case the length guards.)
func TestHeldResendGuard(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("guard")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "guard") })
	require.NoError(t, s.AddItems(ctx, conformance.Numbered("start", 3)))
	v, err := s.AppendWithCheckpoint(ctx, nil, "run", []byte(`{"n":0}`), 0)
	require.NoError(t, err)
	cause := errors.New("lost")
	for _, wrong := range []int64{2, 4} {
		before := dumpKeys(t, c, sessionAllKeys(s))
		_, done, err := s.resend(ctx, conformance.Numbered("late", 1), "run", []byte(`{"n":1}`), v, wrong, cause)
		require.True(t, done)
		require.ErrorIs(t, err, session.ErrOutcomeUnknown)
		require.ErrorIs(t, err, cause)
		require.Equal(t, before, dumpKeys(t, c, sessionAllKeys(s)), "length %d: nothing written", wrong)
	}
	got, done, err := s.resend(ctx, conformance.Numbered("late", 1), "run", []byte(`{"n":1}`), v, 3, cause)
	require.True(t, done)
	require.NoError(t, err)
	require.Equal(t, v+1, got)
	require.Equal(t, []string{"start-0", "start-1", "start-2", "late-0"}, contents(t, s))
}
