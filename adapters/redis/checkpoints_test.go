package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// layoutCase is one deployment and layout the checkpoint tests run on:
// native on standalone and on the cluster, Python on standalone (the
// layout is refused on a cluster).
type layoutCase struct {
	name   string
	client func(testing.TB) goredis.UniversalClient
	layout Layout
}

var layoutCases = []layoutCase{
	{"standalone", bothClients["standalone"], LayoutNative},
	{"cluster", bothClients["cluster"], LayoutNative},
	{"standalone-python", bothClients["standalone"], LayoutPython},
}

// sessionAllKeys returns every key of s, its checkpoint hash last.
func sessionAllKeys(s *Session) []string { return append(s.Keys(), s.CheckpointKey()) }

// TestCheckpointKeyLayout: the checkpoint hash sits beside the session's
// keys, in its hash slot in the native layout.
func TestCheckpointKeyLayout(t *testing.T) {
	nat := newStore(t, standaloneClient(t), Options{KeyPrefix: "p"})
	s, err := nat.Session("a:{b}")
	require.NoError(t, err)
	require.Equal(t, "p:{a%3A%7Bb%7D}:checkpoints", s.CheckpointKey())
	require.Equal(t, []string{"p:{a%3A%7Bb%7D}:items", "p:{a%3A%7Bb%7D}:meta"}, s.Keys(), "Keys lists the history's keys only")
	py := newStore(t, standaloneClient(t), Options{Layout: LayoutPython})
	ps, err := py.Session("a:{b}")
	require.NoError(t, err)
	require.Equal(t, "agents:session:a:{b}:checkpoints:messages:counter", ps.CheckpointKey())
}

// TestPythonCheckpointKeyConfined: in the Python layout, where ids are not
// escaped, no two accepted ids share a key, checkpoint hashes included,
// whatever suffixes the ids carry.
func TestPythonCheckpointKeyConfined(t *testing.T) {
	st := newStore(t, standaloneClient(t), Options{Layout: LayoutPython})
	owner := map[string]string{}
	suffixes := []string{"", ":checkpoints", ":checkpoints:messages", ":checkpoints:messages:counter", ":messages", ":counter",
		":messages:counter", ":counter:messages", ":checkpoints:counter", ":x"}
	for _, base := range hostileIDs {
		for _, a := range suffixes {
			for _, b := range suffixes {
				id := base + a + b
				s, err := st.Session(id)
				if err != nil {
					require.ErrorIs(t, err, session.ErrInvalidSessionID)
					continue
				}
				for _, k := range sessionAllKeys(s) {
					if other, ok := owner[k]; ok && other != id {
						t.Fatalf("ids %q and %q share the key %q", other, id, k)
					}
					owner[k] = id
				}
			}
		}
	}
}

// TestAppendWithCheckpointStaleWritesNothing: a commit at a stale version
// (or at a version of a checkpoint that is not there) writes nothing at
// all: every key of the session is byte for byte what it was, expiry
// included, and a fresh session gets no key.
//
// The native commits after the handle's first append go through the fence
// (commitFenced: the push lands, and is taken off again), with and without
// a TTL; in the Python layout through the commit script.
func TestAppendWithCheckpointStaleWritesNothing(t *testing.T) {
	for _, tc := range layoutCases {
		for _, ttl := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("%s/ttl=%v", tc.name, ttl), func(t *testing.T) {
				ctx := context.Background()
				c := tc.client(t)
				st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout, TTL: ttl})
				s, err := st.Session("stale")
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "stale") })

				require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 2)))
				v1, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 1), "run", []byte(`{"n":1}`), 0)
				require.NoError(t, err)
				require.Equal(t, int64(1), v1)
				v2, err := s.SaveCheckpoint(ctx, "run", []byte(`{"n":2}`), v1)
				require.NoError(t, err)
				require.Equal(t, int64(2), v2)
				keys := sessionAllKeys(s)
				before := dumpKeys(t, c, keys)
				ttlBefore := expireTimes(t, c, keys)

				for _, version := range []int64{v1, 0, v2 + 1, -7} {
					_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("stale", 3), "run", []byte(`{"stale":true}`), version)
					require.ErrorIs(t, err, session.ErrCheckpointConflict, "version %d", version)
					require.Contains(t, err.Error(), `"run"`, "the error names the checkpoint")
					require.Contains(t, err.Error(), `"stale"`, "the error names the session")
					require.NotContains(t, err.Error(), `{"stale":true}`, "the error never prints the document")
					require.Contains(t, err.Error(), "at version 2, not")
				}
				_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("ghost", 1), "other", []byte(`{"ghost":1}`), 4)
				require.ErrorIs(t, err, session.ErrCheckpointConflict)

				require.Equal(t, before, dumpKeys(t, c, keys), "every key byte for byte unchanged")
				require.Equal(t, ttlBefore, expireTimes(t, c, keys), "no expiry refreshed")
				got, err := s.Items(ctx)
				require.NoError(t, err)
				require.Equal(t, texts(append(conformance.Numbered("a", 2), conformance.Numbered("b", 1)...)), texts(got))
				doc, v, err := s.LoadCheckpoint(ctx, "run")
				require.NoError(t, err)
				require.Equal(t, `{"n":2}`, string(doc))
				require.Equal(t, v2, v)
				names, err := s.ListCheckpoints(ctx)
				require.NoError(t, err)
				require.Equal(t, []string{"run"}, names)

				// A fresh session: no key at all, metadata included.
				f, err := st.Session("fresh")
				require.NoError(t, err)
				_, err = f.AppendWithCheckpoint(ctx, conformance.Numbered("f", 2), "run", []byte(`{}`), 3)
				require.ErrorIs(t, err, session.ErrCheckpointConflict)
				n, err := c.Exists(ctx, sessionAllKeys(f)...).Result()
				require.NoError(t, err)
				require.Zero(t, n, "a conflicting commit creates no key")
			})
		}
	}
}

// TestAppendWithCheckpointFailureWritesNothing: the commit script checks
// every key it writes before its first write, so a key of another type,
// or a version field that is not a version, fails the commit with nothing
// written.
func TestAppendWithCheckpointFailureWritesNothing(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout})
			fresh := func(id string) (*Session, []string) {
				s, err := st.Session(id)
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.RemoveSession(context.Background(), id) })
				return s, sessionAllKeys(s)
			}
			for _, fc := range []struct {
				name  string
				setup func(s *Session)
				// existing: the case also runs on a session the handle
				// appended to first (the native commit is then fenced: its
				// push lands first, and is trimmed off again).
				existing bool
			}{
				{"checkpoint key of another type", func(s *Session) {
					require.NoError(t, c.Set(ctx, s.CheckpointKey(), "not a hash", 0).Err())
				}, true},
				{"items key of another type", func(s *Session) {
					require.NoError(t, c.Set(ctx, s.Keys()[0], "not a list", 0).Err())
				}, true},
				{"metadata key of another type", func(s *Session) {
					require.NoError(t, c.Set(ctx, s.Keys()[1], "not a hash", 0).Err())
				}, false},
				{"damaged version", func(s *Session) {
					require.NoError(t, c.HSet(ctx, s.CheckpointKey(), "v:run", "seven", "d:run", "{}").Err())
				}, true},
				{"version too long", func(s *Session) {
					require.NoError(t, c.HSet(ctx, s.CheckpointKey(), "v:run", "1234567890123456789", "d:run", "{}").Err())
				}, true},
			} {
				for _, existing := range []bool{false, true} {
					if existing && !fc.existing {
						continue
					}
					name := fc.name
					if existing {
						name += " with items"
					}
					s, keys := fresh(strings.ReplaceAll(name, " ", "-"))
					if existing {
						require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 3)))
					}
					fc.setup(s)
					before := dumpKeys(t, c, keys)
					_, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("x", 2), "run", []byte(`{"secret":1}`), session.AnyVersion)
					require.Error(t, err, name)
					require.NotErrorIs(t, err, session.ErrCheckpointConflict, name)
					require.NotContains(t, err.Error(), "secret", "the error never prints the document")
					require.Equal(t, before, dumpKeys(t, c, keys), "%s: nothing written", name)
				}
			}
			s, _ := fresh("damaged-load")
			require.NoError(t, c.HSet(ctx, s.CheckpointKey(), "v:run", "x").Err())
			_, _, err := s.LoadCheckpoint(ctx, "run")
			require.Error(t, err)
			require.NotErrorIs(t, err, session.ErrNoCheckpoint)
		})
	}
}

// expireTimes returns PEXPIRETIME of every key (Unix ms; -1 for no expiry,
// -2 for a missing key).
func expireTimes(t *testing.T, c goredis.UniversalClient, keys []string) []int64 {
	t.Helper()
	out := make([]int64, len(keys))
	for i, k := range keys {
		d, err := c.PExpireTime(context.Background(), k).Result()
		require.NoError(t, err)
		out[i] = int64(d / time.Millisecond)
		if d < 0 {
			out[i] = int64(d)
		}
	}
	return out
}

// requireExpireTogether fails unless every existing key of s expires at
// the same instant (to the millisecond a MULTI/EXEC may straddle), that
// instant lies within the TTL of now, and it is later than after (the
// write refreshed it). It returns that instant.
func requireExpireTogether(t *testing.T, c goredis.UniversalClient, s *Session, ttl time.Duration, after int64, what string) int64 {
	t.Helper()
	keys := sessionAllKeys(s)
	times := expireTimes(t, c, keys)
	var at int64
	for i, k := range keys {
		if times[i] == -2 {
			continue // a key the session does not have (the Python counter)
		}
		require.Positive(t, times[i], "%s: %s has an expiry", what, k)
		if at == 0 {
			at = times[i]
		}
		require.InDelta(t, at, times[i], 2, "%s: %s expires with the others (%v)", what, k, times)
	}
	require.NotZero(t, at, what)
	pttl, err := c.PTTL(context.Background(), s.CheckpointKey()).Result()
	require.NoError(t, err)
	require.True(t, pttl > ttl-5*time.Second && pttl <= ttl, "%s: the checkpoint hash's TTL is %v, want the session's %v", what, pttl, ttl)
	require.Greater(t, at, after, "%s: the write refreshed the expiry", what)
	return at
}

// TestCheckpointTTLMatchesSession: with a TTL the checkpoint hash expires
// with the session's other keys, to the millisecond, after every kind of
// write: a save sets the whole session's expiry, and every append (on
// each of its paths), pop, replace and Touch sets the checkpoint hash's.
func TestCheckpointTTLMatchesSession(t *testing.T) {
	const ttl = time.Hour
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout, TTL: ttl})
			s, err := st.Session("ttl")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "ttl") })
			tick := func() { time.Sleep(5 * time.Millisecond) }

			v, err := s.SaveCheckpoint(ctx, "run", []byte(`{"n":1}`), 0)
			require.NoError(t, err)
			at := requireExpireTogether(t, c, s, ttl, 0, "a save in a session with no items")
			d, ok, err := s.ExpiresIn(ctx)
			require.NoError(t, err)
			require.True(t, ok, "a session holding only checkpoints reports its expiry")
			require.True(t, d > ttl-5*time.Second && d <= ttl, "%v", d)

			steps := []struct {
				what string
				fn   func() error
			}{
				{"the first append (the list is created)", func() error { return s.AddItems(ctx, conformance.Numbered("a", 2)) }},
				{"an append to the list", func() error { return s.AddItems(ctx, conformance.Numbered("b", 2)) }},
				{"a save", func() error { v, err = s.SaveCheckpoint(ctx, "run", []byte(`{"n":2}`), v); return err }},
				{"a commit", func() error {
					v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 1), "run", []byte(`{"n":3}`), v)
					return err
				}},
				{"an empty commit", func() error {
					v, err = s.AppendWithCheckpoint(ctx, nil, "run", []byte(`{"n":4}`), v)
					return err
				}},
				{"a save of another checkpoint", func() error {
					_, err := s.SaveCheckpoint(ctx, "other", []byte(`{}`), 0)
					return err
				}},
				{"a pop", func() error { _, _, err := s.PopItem(ctx); return err }},
				{"a replace", func() error { return s.ReplaceItems(ctx, conformance.Numbered("r", 3)) }},
				{"a touch", func() error { return s.Touch(ctx) }},
				{"an append after the replace", func() error { return s.AddItems(ctx, conformance.Numbered("d", 1)) }},
			}
			for _, step := range steps {
				tick()
				require.NoError(t, step.fn(), step.what)
				at = requireExpireTogether(t, c, s, ttl, at, "after "+step.what)
			}

			// Clear keeps the checkpoints, with their expiry; a delete
			// leaves the expiry alone. The hash's own expiry is compared:
			// a MULTI/EXEC may set the keys' a millisecond apart.
			ckAt := expireTimes(t, c, []string{s.CheckpointKey()})[0]
			require.InDelta(t, at, ckAt, 2)
			require.NoError(t, s.Clear(ctx))
			got := expireTimes(t, c, []string{s.CheckpointKey()})
			require.Equal(t, ckAt, got[0], "Clear leaves the checkpoint hash's expiry as it was")
			d, ok, err = s.ExpiresIn(ctx)
			require.NoError(t, err)
			require.True(t, ok, "the checkpoints left by Clear report their expiry")
			require.True(t, d > 0 && d <= ttl, "%v", d)
			require.NoError(t, s.DeleteCheckpoint(ctx, "other", 1))
			got = expireTimes(t, c, []string{s.CheckpointKey()})
			require.Equal(t, ckAt, got[0], "a delete leaves the expiry as it was")
		})
	}
}

// TestCheckpointsExpireWithSession: on the server's clock, the checkpoint
// hash goes with the items.
func TestCheckpointsExpireWithSession(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	const ttl = 500 * time.Millisecond
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl})
	s, err := st.Session("e")
	require.NoError(t, err)
	_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("a", 2), "run", []byte(`{}`), 0)
	require.NoError(t, err)
	time.Sleep(ttl + 300*time.Millisecond)
	n, err := c.Exists(ctx, sessionAllKeys(s)...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "items, metadata and checkpoints are gone together")
	_, _, err = s.LoadCheckpoint(ctx, "run")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	v, err := s.SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
	require.NoError(t, err, "an expired checkpoint is created again from version 0")
	require.Equal(t, int64(1), v)
}

// TestCheckpointsBesideTheSession: Clear and an empty replace keep the
// checkpoints; RemoveSession (of the Store and of the URL store, which
// sessionctl check's cleanup uses) deletes them with the rest; a session
// whose only key is its checkpoint hash is not listed.
func TestCheckpointsBesideTheSession(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			prefix := uniquePrefix(t)
			st := newStore(t, c, Options{KeyPrefix: prefix, Layout: tc.layout})
			s, err := st.Session("kept")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "kept") })
			v, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("a", 2), "run", []byte(`{"n":1}`), 0)
			require.NoError(t, err)

			require.NoError(t, s.Clear(ctx))
			n, err := c.Exists(ctx, s.Keys()...).Result()
			require.NoError(t, err)
			require.Zero(t, n, "Clear deletes the history's keys")
			doc, got, err := s.LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.Equal(t, v, got)
			require.Equal(t, `{"n":1}`, string(doc), "Clear keeps the checkpoints")
			ids, err := st.listSessions(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"kept"}, ids, "a session holding only checkpoints is a session: listed")

			require.NoError(t, s.AddItems(ctx, conformance.Numbered("b", 1)))
			require.NoError(t, s.ReplaceItems(ctx, nil))
			_, got, err = s.LoadCheckpoint(ctx, "run")
			require.NoError(t, err, "an empty replace keeps the checkpoints, as Clear")
			require.Equal(t, v, got)
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("c", 1)))
			ids, err = st.listSessions(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"kept"}, ids)

			require.NoError(t, st.RemoveSession(ctx, "kept"))
			n, err = c.Exists(ctx, sessionAllKeys(s)...).Result()
			require.NoError(t, err)
			require.Zero(t, n, "RemoveSession deletes every key, the checkpoint hash's too")
		})
	}
	t.Run("url store", func(t *testing.T) {
		ctx := context.Background()
		prefix := uniquePrefix(t)
		st, err := adapters.Open(ctx, withQuery(t, testservers.Redis(t), map[string]string{"key_prefix": prefix}))
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		s, err := st.Session("u")
		require.NoError(t, err)
		cs := s.(session.CheckpointStore)
		_, err = cs.SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
		require.NoError(t, err)
		require.NoError(t, s.Clear(ctx))
		r, ok := st.(interface {
			RemoveSession(context.Context, string) error
		})
		require.True(t, ok, "the URL store removes sessions, for sessionctl check's cleanup")
		require.NoError(t, r.RemoveSession(ctx, "u"))
		_, _, err = cs.LoadCheckpoint(ctx, "run")
		require.ErrorIs(t, err, session.ErrNoCheckpoint)
	})
}

// TestPythonSDKIgnoresCheckpoints: the Python SDK's RedisSession, issuing
// its own commands on the same keys, neither sees nor disturbs the
// checkpoint hash: it reads its items, its clear_session keeps the
// checkpoints (as Clear does), and the adapter reads Python's appends.
func TestPythonSDKIgnoresCheckpoints(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	id := uniqueID(t)
	st := newStore(t, c, Options{Layout: LayoutPython})
	s, err := st.Session(id)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.RemoveSession(context.Background(), id) })
	py := newPySession(t, c, DefaultPythonKeyPrefix, id, 0)

	stored := py.addItems(pythonItems[:2])
	v, err := s.AppendWithCheckpoint(ctx, []session.Item{session.MustItem(`{"role":"user","content":"go"}`)}, "run", []byte(`{"n":1}`), 0)
	require.NoError(t, err)
	require.Equal(t, append(stored, `{"role":"user","content":"go"}`), py.getItems(-1), "Python reads its items and ours, not the checkpoints")
	stored = append(append(stored, `{"role":"user","content":"go"}`), py.addItems(pythonItems[2:3])...)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, stored, texts(got))

	py.clearSession()
	require.Empty(t, py.getItems(-1))
	doc, got2, err := s.LoadCheckpoint(ctx, "run")
	require.NoError(t, err, "Python's clear_session keeps the checkpoints")
	require.Equal(t, `{"n":1}`, string(doc))
	require.Equal(t, v, got2)
	ids, err := st.listSessions(ctx)
	require.NoError(t, err)
	require.Contains(t, ids, id, "a session whose checkpoints Python's clear_session kept is listed")
}

// TestMovePrefixCheckpoints: MovePrefix moves a session's checkpoint hash
// with its other keys, and a session holding only checkpoints, except
// under a prefix in the Python layout's default key space, where such a
// key is a Python-layout session's and stays.
func TestMovePrefixCheckpoints(t *testing.T) {
	for name, mk := range bothClients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := mk(t)
			from, to := uniquePrefix(t)+":old", uniquePrefix(t)+":new"
			old := newStore(t, c, Options{KeyPrefix: from})
			both, err := old.Session("both")
			require.NoError(t, err)
			_, err = both.AppendWithCheckpoint(ctx, conformance.Numbered("b", 2), "run", []byte(`{"b":1}`), 0)
			require.NoError(t, err)
			only, err := old.Session("only")
			require.NoError(t, err)
			_, err = only.SaveCheckpoint(ctx, "run", []byte(`{"o":1}`), 0)
			require.NoError(t, err)
			require.NoError(t, c.PExpire(ctx, only.CheckpointKey(), time.Hour).Err())
			dumps := map[string]map[string]string{}
			for _, s := range []*Session{both, only} {
				dumps[s.SessionID()] = dumpKeys(t, c, sessionAllKeys(s))
			}

			moved, err := MovePrefix(ctx, c, from, to)
			require.NoError(t, err)
			require.Equal(t, 2, moved)
			st := newStore(t, c, Options{KeyPrefix: to})
			t.Cleanup(func() {
				for _, id := range []string{"both", "only"} {
					_ = st.RemoveSession(context.Background(), id)
				}
			})
			for _, id := range []string{"both", "only"} {
				s, err := st.Session(id)
				require.NoError(t, err)
				d := dumpKeys(t, c, sessionAllKeys(s))
				src, _ := old.Session(id)
				for i, k := range sessionAllKeys(src) {
					require.Equal(t, dumps[id][k], d[sessionAllKeys(s)[i]], "%s: %s moved byte for byte", id, k)
				}
				n, err := c.Exists(ctx, sessionAllKeys(src)...).Result()
				require.NoError(t, err)
				require.Zero(t, n, "%s: nothing left under the old prefix", id)
			}
			s, err := st.Session("both")
			require.NoError(t, err)
			doc, v, err := s.LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.Equal(t, `{"b":1}`, string(doc))
			require.Equal(t, int64(1), v)
			o, err := st.Session("only")
			require.NoError(t, err)
			pt, err := c.PTTL(ctx, o.CheckpointKey()).Result()
			require.NoError(t, err)
			require.Greater(t, pt, 59*time.Minute, "the expiry moves with the key")
		})
	}
	t.Run("python default key space", func(t *testing.T) {
		ctx := context.Background()
		c := standaloneClient(t)
		// A sub-prefix of the Python default, so that the scan stays in
		// this test's keys.
		sub := uniqueID(t)
		from := DefaultPythonKeyPrefix + ":" + sub
		require.True(t, prefixesOverlap(from, DefaultPythonKeyPrefix))
		// A native session of an old store (written by hand: New refuses
		// the prefix), and a Python-layout session "<sub>:{x}:checkpoints"
		// whose hash sits where native session "x"'s checkpoint hash would.
		native := nativeKeys(from, "n")
		require.NoError(t, c.RPush(ctx, native[0], `{"n":1}`).Err())
		require.NoError(t, c.HSet(ctx, native[1], "session_id", "n").Err())
		py := newStore(t, c, Options{Layout: LayoutPython})
		pyID := sub + ":{x}:checkpoints"
		ps, err := py.Session(pyID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = py.RemoveSession(context.Background(), pyID) })
		require.NoError(t, ps.AddItems(ctx, conformance.Numbered("p", 1)))
		require.Equal(t, nativeCheckpointKey(from, "x"), ps.Keys()[1])
		before := dumpKeys(t, c, sessionAllKeys(ps))

		to := uniquePrefix(t)
		moved, err := MovePrefix(ctx, c, from, to)
		require.NoError(t, err)
		require.Equal(t, 1, moved, "only the native session moves")
		dst := newStore(t, c, Options{KeyPrefix: to})
		t.Cleanup(func() { _ = dst.RemoveSession(context.Background(), "n") })
		require.Equal(t, before, dumpKeys(t, c, sessionAllKeys(ps)), "the Python-layout session stays, byte for byte")
		x, err := dst.Session("x")
		require.NoError(t, err)
		n, err := c.Exists(ctx, sessionAllKeys(x)...).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing was moved as native session x")
	})
}

// withoutHandshakes drops from trips the handshake of a connection the
// pool dialled meanwhile (HELLO, then CLIENT SETINFO twice, pipelined):
// an operation's protocol does not include it.
func withoutHandshakes(trips []string) []string {
	return slices.DeleteFunc(trips, func(t string) bool { return t == "hello" || t == "pipeline(client,client)" })
}

// fencedTrip is the round trip of a commit onto a session the handle
// wrote to before (commitFenced).
const fencedTrip = "pipeline(multi,rpush,eval,exec)"

// heldTrip is a commit on a held connection; watchTrip is the WATCH that
// starts holding one (held.go).
const (
	heldTrip  = "pipeline(multi,rpush,hset,exec,watch,llen,hget)"
	watchTrip = "pipeline(watch,llen,hget)"
)

// TestCheckpointRoundTrips: every checkpoint operation is one round trip,
// on standalone and cluster, but a commit after another handle deleted the
// history (the fence finds no list, and the commit script runs).
func TestCheckpointRoundTrips(t *testing.T) {
	for name, cc := range countedClients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			plain := newStore(t, cc.client, Options{KeyPrefix: uniquePrefix(t)})
			refresh := newStore(t, cc.client, Options{KeyPrefix: uniquePrefix(t), TTL: time.Minute, RefreshOnRead: true})
			require.NoError(t, plain.LoadScripts(ctx))
			for _, st := range []*Store{plain, refresh} {
				s, err := st.Session("rt") // the node of the session below, in a cluster
				require.NoError(t, err)
				_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("w", 1), "run", []byte(`{}`), session.AnyVersion)
				require.NoError(t, err)
				_, _, err = s.LoadCheckpoint(ctx, "run")
				require.NoError(t, err)
				_, err = s.ListCheckpoints(ctx)
				require.NoError(t, err)
				require.NoError(t, s.DeleteCheckpoint(ctx, "run", session.AnyVersion))
				require.NoError(t, st.RemoveSession(ctx, "rt"))
			}
			s, err := plain.Session("rt")
			require.NoError(t, err)
			rs, err := refresh.Session("rt")
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = plain.RemoveSession(context.Background(), "rt")
				_ = refresh.RemoveSession(context.Background(), "rt")
			})
			var v int64
			// staleCommit commits at version 0: a conflict.
			staleCommit := func() error {
				_, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 3), "run", []byte(`{}`), 0)
				if errors.Is(err, session.ErrCheckpointConflict) {
					return nil
				}
				return fmt.Errorf("want a conflict, got %v", err)
			}
			// afterOther appends through another handle, then commits.
			afterOther := func(tag string) func() error {
				return func() error {
					other, err := plain.Session("rt")
					if err != nil {
						return err
					}
					if err := other.AddItems(ctx, conformance.Numbered("other-"+tag, 1)); err != nil {
						return err
					}
					v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered(tag, 3), "run", []byte(`{}`), v)
					return err
				}
			}
			for _, tc := range []struct {
				op   string
				fn   func() error
				want []string
			}{
				{"save", func() error { v, err = s.SaveCheckpoint(ctx, "run", []byte(`{}`), 0); return err }, []string{"evalsha"}},
				{"commit creating the session", func() error {
					v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 3), "run", []byte(`{}`), v)
					return err
				}, []string{"evalsha"}},
				{"commit", func() error {
					v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("d", 3), "run", []byte(`{}`), v)
					return err
				}, []string{fencedTrip}},
				{"stale commit", staleCommit, []string{fencedTrip}},
				{"commit after another handle cleared the history", func() error {
					other, err := plain.Session("rt")
					if err != nil {
						return err
					}
					if err := cc.client.Del(ctx, other.Keys()...).Err(); err != nil {
						return err
					}
					v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("e", 3), "run", []byte(`{}`), v)
					return err
				}, []string{"del", fencedTrip, "evalsha", watchTrip}}, // the second commit in a row holds a connection
				{"commit on the held connection", func() error {
					v, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("f", 3), "run", []byte(`{}`), v)
					return err
				}, []string{heldTrip}},
				{"stale commit while held", staleCommit, []string{fencedTrip}}, // the held connection is let go
				{"commit after another handle appended", afterOther("g"), []string{"rpushx", fencedTrip, watchTrip}},
				// The server refuses the held EXEC: the fence commits.
				{"commit on the held connection after another handle appended", afterOther("h"), []string{"rpushx", heldTrip, fencedTrip, watchTrip}},
				{"load", func() error { _, _, err := s.LoadCheckpoint(ctx, "run"); return err }, []string{"hmget"}},
				{"list", func() error { _, err := s.ListCheckpoints(ctx); return err }, []string{"hkeys"}},
				{"delete", func() error { return s.DeleteCheckpoint(ctx, "run", v) }, []string{"evalsha"}},
				{"ttl save", func() error { _, err := rs.SaveCheckpoint(ctx, "run", []byte(`{}`), 0); return err }, []string{"evalsha"}},
				{"ttl load with refresh", func() error { _, _, err := rs.LoadCheckpoint(ctx, "run"); return err }, []string{"evalsha"}},
				{"expires-in of a session holding only checkpoints", func() error {
					_, ok, err := rs.ExpiresIn(ctx)
					if err == nil && !ok {
						err = errors.New("no expiry")
					}
					return err
				}, []string{"pttl", "pttl"}},
			} {
				var err error
				got := withoutHandshakes(cc.counter.during(func() { err = tc.fn() }))
				require.NoError(t, err, tc.op)
				assert.Equal(t, tc.want, got, "%s: round trips", tc.op)
			}
		})
	}
}

// TestCheckpointArgs: names and documents are refused before anything is
// sent when empty; the context and Close are checked first.
func TestCheckpointArgs(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("args")
	require.NoError(t, err)
	_, err = s.SaveCheckpoint(ctx, "", []byte(`{}`), 0)
	require.Error(t, err)
	_, err = s.SaveCheckpoint(ctx, "run", nil, 0)
	require.Error(t, err)
	_, _, err = s.LoadCheckpoint(ctx, "")
	require.Error(t, err)
	require.Error(t, s.DeleteCheckpoint(ctx, "", 0))
	_, err = s.AppendWithCheckpoint(ctx, []session.Item{{}}, "run", []byte(`{}`), 0)
	require.ErrorIs(t, err, session.ErrInvalidItem)
	small := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), MaxBatchBytes: 10})
	ss, err := small.Session("args")
	require.NoError(t, err)
	_, err = ss.AppendWithCheckpoint(ctx, conformance.Numbered("big", 3), "run", []byte(`{}`), 0)
	require.ErrorIs(t, err, session.ErrBatchTooLarge)
	n, err := c.Exists(ctx, append(sessionAllKeys(s), sessionAllKeys(ss)...)...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.SaveCheckpoint(cctx, "run", []byte(`{}`), 0)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.ListCheckpoints(cctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, st.Close())
	_, _, err = s.LoadCheckpoint(ctx, "run")
	require.ErrorIs(t, err, session.ErrClosed)
}

// TestCheckpointVersionDigits: a commit advances a stored version of any
// length the head check accepts by exactly one (under 15 digits in the
// script's Lua, longer ones by HINCRBY), and stores it as the decimal
// string a load parses back.
func TestCheckpointVersionDigits(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout})
			s, err := st.Session("digits")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "digits") })
			for _, stored := range []int64{9, 99999999999999, 999999999999999, 9007199254740993, 999999999999999998} {
				require.NoError(t, c.HSet(ctx, s.CheckpointKey(), "v:run", stored, "d:run", "{}").Err())
				v, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("d", 1), "run", []byte(`{"n":1}`), stored)
				require.NoError(t, err, "stored %d", stored)
				require.Equal(t, stored+1, v, "stored %d", stored)
				raw, err := c.HGet(ctx, s.CheckpointKey(), "v:run").Result()
				require.NoError(t, err)
				require.Equal(t, strconv.FormatInt(stored+1, 10), raw)
				doc, lv, err := s.LoadCheckpoint(ctx, "run")
				require.NoError(t, err)
				require.Equal(t, stored+1, lv)
				require.Equal(t, `{"n":1}`, string(doc))
			}
		})
	}
}

// TestAppendWithCheckpointOutOfMemoryWritesNothing: the batch must never
// land without its checkpoint. A server out of memory refuses the commit
// script's first write, before anything is written (a private server, its
// maxmemory set below what it uses, noeviction).
func TestAppendWithCheckpointOutOfMemoryWritesNothing(t *testing.T) {
	ctx := context.Background()
	srv := testservers.NewRedisServer(t)
	o, err := goredis.ParseURL(srv.URL())
	require.NoError(t, err)
	c := goredis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("oom")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 3)))
	v, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 2), "run", []byte(`{"n":1}`), 0)
	require.NoError(t, err)
	keys := sessionAllKeys(s)
	before := dumpKeys(t, c, keys)

	require.NoError(t, c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
	_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 2), "run", []byte(`{"n":2}`), v)
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "0").Err())
	require.Error(t, err, "the server is out of memory")
	require.Contains(t, err.Error(), "OOM")
	require.Equal(t, before, dumpKeys(t, c, keys), "nothing written: not the batch without its checkpoint")

	_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 2), "run", []byte(`{"n":2}`), v)
	require.NoError(t, err, "with memory again the same commit lands")
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 7)
}
