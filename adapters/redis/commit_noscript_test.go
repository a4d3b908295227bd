package redis

import (
	"bytes"
	"context"
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

// TestCommitAfterScriptFlush: AppendWithCheckpoint sends the commit script
// with EVALSHA; a server whose script cache was emptied answers NOSCRIPT
// having run nothing (the push is inside the script), and the commit is
// sent once more with EVAL. The batch then lands exactly once, with its
// checkpoint; a conflicting commit on an empty cache writes nothing, not
// the batch without its checkpoint. Every layout, standalone and cluster.
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
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout})
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

			flushScripts(t, c)
			var cerr error
			got := trips.during(func() {
				_, cerr = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 2), "run", []byte(`{"n":2}`), 0)
			})
			require.ErrorIs(t, cerr, session.ErrCheckpointConflict)
			require.Equal(t, []string{"evalsha", "eval"}, got, "NOSCRIPT, then the script in full")
			require.Equal(t, before, dumpKeys(t, c, keys), "a conflict on an empty script cache writes nothing")

			flushScripts(t, c)
			got = trips.during(func() {
				v, cerr = s.AppendWithCheckpoint(ctx, conformance.Numbered("c", 2), "run", []byte(`{"n":2}`), v)
			})
			require.NoError(t, cerr)
			require.Equal(t, []string{"evalsha", "eval"}, got, "NOSCRIPT, then the script in full")
			require.EqualValues(t, 2, v)
			items, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(append(append(conformance.Numbered("a", 3), conformance.Numbered("b", 2)...), conformance.Numbered("c", 2)...)),
				texts(items), "the batch landed once")
			doc, lv, err := s.LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.EqualValues(t, 2, lv)
			require.Equal(t, `{"n":2}`, string(doc))

			got = trips.during(func() {
				v, cerr = s.AppendWithCheckpoint(ctx, conformance.Numbered("d", 2), "run", []byte(`{"n":3}`), v)
			})
			require.NoError(t, cerr)
			require.Equal(t, []string{"evalsha"}, got, "cached again: one round trip")
		})
	}
}

// TestCommitLostReplyNotResent loses the reply of the commit after the
// server ran it, on the EVALSHA and, after a script flush, on the EVAL
// that follows NOSCRIPT. go-redis resends a command after such an error
// unless it is NoRetry; a resent commit at session.AnyVersion would append
// the batch twice. The call must fail (it cannot know the outcome), and
// the batch and its checkpoint must have landed exactly once.
func TestCommitLostReplyNotResent(t *testing.T) {
	for _, verb := range []string{"evalsha", "eval"} {
		for _, layout := range []Layout{LayoutNative, LayoutPython} {
			t.Run(verb+"-"+layout.String(), func(t *testing.T) {
				ctx := context.Background()
				o, err := goredis.ParseURL(testservers.Redis(t))
				require.NoError(t, err)
				proxy, err := faultproxy.Start(o.Addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = proxy.Close() })
				o.Addr = proxy.Addr()
				c := goredis.NewClient(o)
				t.Cleanup(func() { _ = c.Close() })
				st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: layout})
				require.NoError(t, st.LoadScripts(ctx))
				s, err := st.Session("lost")
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.RemoveSession(context.Background(), "lost") })
				require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 2)))
				if verb == "eval" {
					require.NoError(t, c.ScriptFlush(ctx).Err())
				}

				marker := []byte("\r\n" + verb + "\r\n")
				proxy.Once(faultproxy.LoseReply, func(req []byte) bool {
					return bytes.Contains(bytes.ToLower(req), marker)
				})
				_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 2), "run", []byte(`{"n":1}`), session.AnyVersion)
				require.EqualValues(t, 1, proxy.Injected.Load(), "the %s's reply was lost", verb)
				require.Error(t, err, "the reply was lost: the call cannot know it succeeded")

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
}
