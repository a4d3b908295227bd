package redis

import (
	"bytes"
	"context"
	"slices"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// flushScripts empties the script cache of the server, or of every master
// of a cluster, as a restart or a failover to a fresh replica would.
func flushScripts(t *testing.T, c goredis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if cc, ok := c.(*goredis.ClusterClient); ok {
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			return m.ScriptFlush(ctx).Err()
		}))
		return
	}
	require.NoError(t, c.ScriptFlush(ctx).Err())
}

// TestCommitAfterScriptFlush: a commit never depends on the script cache.
// The commit script goes with EVALSHA; a server whose script cache was
// emptied answers NOSCRIPT having run nothing (the push is inside the
// script), and the commit is sent once more with EVAL. The native layout's
// fenced commit (MULTI, RPUSH, the fence, EXEC) sends its fence with EVAL,
// so an empty cache costs it nothing, and above all cannot leave the RPUSH
// applied without the fence. Either way the batch then lands exactly once,
// with its checkpoint, and a conflicting commit on an empty cache writes
// nothing, not the batch without its checkpoint. Every layout, standalone
// and cluster.
func TestCommitAfterScriptFlush(t *testing.T) {
	for _, tc := range layoutCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			trips := &tripCounter{}
			if cc, ok := c.(*goredis.ClusterClient); ok {
				cc.OnNewNode(func(node *goredis.Client) { node.AddHook(trips) })
			} else {
				c.AddHook(trips)
			}
			// No held connection: its commits run no script (held_test.go).
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout, HeldConns: -1})
			require.NoError(t, st.LoadScripts(ctx))
			s, err := st.Session("flush")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "flush") })
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 3)))
			v, err := s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 2), "run", []byte(`{"n":1}`), 0)
			require.NoError(t, err)
			require.EqualValues(t, 1, v)
			keys := sessionAllKeys(s)
			before := dumpKeys(t, c, keys)
			// What a commit onto this session sends on an empty cache: the
			// fence alone in the native layout, else NOSCRIPT and the
			// script in full.
			commit := []string{"evalsha", "eval"}
			if tc.layout == LayoutNative {
				commit = []string{fencedTrip}
			}

			flushScripts(t, c)
			var cerr error
			got := trips.during(func() {
				_, cerr = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 2), "run", []byte(`{"n":2}`), 0)
			})
			require.ErrorIs(t, cerr, session.ErrCheckpointConflict)
			require.Equal(t, commit, withoutHandshakes(got))
			require.Equal(t, before, dumpKeys(t, c, keys), "a conflict on an empty script cache writes nothing")

			flushScripts(t, c)
			got = trips.during(func() {
				v, cerr = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 2), "run", []byte(`{"n":2}`), v)
			})
			require.NoError(t, cerr)
			require.Equal(t, commit, withoutHandshakes(got))
			require.EqualValues(t, 2, v)

			// A new handle's first commit runs the commit script (it
			// cannot know that the list exists), NOSCRIPT and EVAL on
			// an empty cache in every layout.
			flushScripts(t, c)
			s2, err := st.Session("flush")
			require.NoError(t, err)
			got = trips.during(func() {
				v, cerr = s2.AppendWithCheckpoint(ctx, conformance.Numbered("d", 2), "run", []byte(`{"n":3}`), v)
			})
			require.NoError(t, cerr)
			require.Equal(t, []string{"evalsha", "eval"}, withoutHandshakes(got), "NOSCRIPT, then the script in full")
			require.EqualValues(t, 3, v)

			items, err := s.Items(ctx)
			require.NoError(t, err)
			want := slices.Concat(conformance.Numbered("a", 3), conformance.Numbered("b", 2), conformance.Numbered("c", 2), conformance.Numbered("d", 2))
			require.Equal(t, texts(want), texts(items), "every batch landed once")
			doc, lv, err := s.LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.EqualValues(t, 3, lv)
			require.Equal(t, `{"n":3}`, string(doc))

			got = trips.during(func() {
				v, cerr = s2.AppendWithCheckpoint(ctx, conformance.Numbered("e", 2), "run", []byte(`{"n":4}`), v)
			})
			require.NoError(t, cerr)
			if tc.layout == LayoutNative {
				require.Equal(t, []string{fencedTrip}, withoutHandshakes(got), "the handle knows the list now")
			} else {
				require.Equal(t, []string{"evalsha"}, withoutHandshakes(got), "cached again: one round trip")
			}
		})
	}
}

// TestCommitLostReplyNotResent loses the reply of the commit after the
// server ran it: on the commit script's EVALSHA and, after a script flush,
// on the EVAL that follows NOSCRIPT (a handle's first commit, both
// layouts), and on the fenced commit's MULTI/EXEC (native). go-redis
// resends a command after such an error unless it is NoRetry; a resent
// commit at session.AnyVersion would append the batch twice. The call must
// fail with an error wrapping session.ErrOutcomeUnknown (it cannot know
// the outcome), and the batch and its checkpoint must have landed exactly
// once.
func TestCommitLostReplyNotResent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layout Layout
		flush  bool   // empty the script cache first
		fenced bool   // the committing handle appended before
		marker string // a command of the request whose reply is lost
	}{
		{"evalsha-native", LayoutNative, false, false, "evalsha"},
		{"eval-native", LayoutNative, true, false, "eval"},
		{"fenced-native", LayoutNative, false, true, "multi"},
		{"fenced-native-empty-cache", LayoutNative, true, true, "multi"},
		{"evalsha-python", LayoutPython, false, false, "evalsha"},
		{"eval-python", LayoutPython, true, false, "eval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			o, err := goredis.ParseURL(testservers.Redis(t))
			require.NoError(t, err)
			proxy, err := faultproxy.Start(o.Addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = proxy.Close() })
			o.Addr = proxy.Addr()
			c := goredis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout})
			require.NoError(t, st.LoadScripts(ctx))
			s, err := st.Session("lost")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "lost") })
			w := s
			if !tc.fenced {
				w, err = st.Session("lost") // another handle appends
				require.NoError(t, err)
			}
			require.NoError(t, w.AddItems(ctx, conformance.Numbered("a", 2)))
			if tc.flush {
				require.NoError(t, c.ScriptFlush(ctx).Err())
			}

			marker := []byte("\r\n" + tc.marker + "\r\n")
			proxy.Once(faultproxy.LoseReply, func(req []byte) bool {
				return bytes.Contains(bytes.ToLower(req), marker)
			})
			_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 2), "run", []byte(`{"n":1}`), session.AnyVersion)
			require.EqualValues(t, 1, proxy.Injected.Load(), "the %s's reply was lost", tc.marker)
			require.ErrorIs(t, err, session.ErrOutcomeUnknown, "the reply was lost: the call cannot know it succeeded")

			items, rerr := s.Items(ctx)
			require.NoError(t, rerr)
			require.Equal(t, texts(append(conformance.Numbered("a", 2), conformance.Numbered("b", 2)...)),
				texts(items), "the batch landed once: the commit was not resent (the call returned %v)", err)
			doc, v, lerr := s.LoadCheckpoint(ctx, "run")
			require.NoError(t, lerr)
			require.EqualValues(t, 1, v, "the checkpoint was saved once")
			require.Equal(t, `{"n":1}`, string(doc))
		})
	}
}
