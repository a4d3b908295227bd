package redis

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// withQuery returns base with the query options set.
func withQuery(t *testing.T, base string, opts map[string]string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	for k, v := range opts {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// checkURLStore opens dsn through the umbrella and checks what a URL store
// promises: declared = probed, raw writes reach the corrupt handler, the
// listing finds the session. It returns the store and its session "a".
func checkURLStore(t *testing.T, dsn string) (adapters.Store, session.Session) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var reports []driver.CorruptRecord
	st, err := adapters.OpenWith(ctx, dsn, adapters.Options{OnCorrupt: func(_ context.Context, r driver.CorruptRecord) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r)
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	s, err := st.Session("a")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Clear(context.Background()) })
	require.Equal(t, session.Probe(s), st.Declared(), "declared = probed")
	want := session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace,
		session.CapFollow, session.CapAppendOnce)
	if strings.Contains(dsn, "layout=python") {
		// The Python layout cannot see a Python pop followed by an append
		// of the same bytes: it is no Follower (Store.Handle).
		want = session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace,
			session.CapAppendOnce)
	}
	require.Equal(t, want, st.Declared())

	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	raw, ok := st.(driver.RawAppender)
	require.True(t, ok)
	require.NoError(t, raw.AppendRaw(ctx, "a", []byte("not json")))
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	mu.Lock()
	require.Len(t, reports, 1)
	require.Equal(t, "not json", string(reports[0].Raw))
	mu.Unlock()

	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids)
	return st, s
}

func TestURLOpenerStandalone(t *testing.T) {
	for _, layout := range []string{"native", "python"} {
		t.Run(layout, func(t *testing.T) {
			prefix := uniquePrefix(t)
			_, s := checkURLStore(t, withQuery(t, testservers.Redis(t), map[string]string{
				"key_prefix": prefix, "layout": layout, "ttl": "1h", "refresh_on_read": "true",
				"max_batch_bytes": "4096", "dial_timeout": "2s", "held_conns": "-1",
			}))
			rs, ok := s.(*Session)
			if !ok {
				rs = s.(PythonSession).Session
			}
			require.True(t, strings.HasPrefix(rs.Keys()[0], prefix+":"), "key_prefix applied")
			require.Equal(t, layout, rs.st.opts.Layout.String(), "layout applied")
			require.Equal(t, "1h0m0s", rs.TTL().String(), "ttl applied")
			require.True(t, rs.st.opts.RefreshOnRead, "refresh_on_read applied")
			require.Equal(t, 4096, rs.st.opts.MaxBatchBytes, "max_batch_bytes applied")
			require.Zero(t, rs.st.heldCap, "held_conns applied")
			big := session.MustItem(`{"s":"` + strings.Repeat("x", 5000) + `"}`)
			require.ErrorIs(t, s.AddItems(context.Background(), []session.Item{big}), session.ErrBatchTooLarge)
		})
	}
}

func TestURLOpenerCluster(t *testing.T) {
	addrs := testservers.RedisCluster(t)
	prefix := uniquePrefix(t)
	st, _ := checkURLStore(t, "redis+cluster://"+strings.Join(addrs, ",")+"?key_prefix="+url.QueryEscape(prefix))
	ctx := context.Background()
	// sessions land on several primaries; the listing scans them all
	var want []string
	for _, id := range []string{"b", "c", "d", "e", "f", "g"} {
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
		t.Cleanup(func() { _ = s.Clear(context.Background()) })
		want = append(want, id)
	}
	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, append([]string{"a"}, want...), ids)
}

// Refused before anything is sent: the server would otherwise see writes
// under the default prefix (key_prefix=my;app, issue 10.4).
func TestURLOpenerRefuses(t *testing.T) {
	base := testservers.Redis(t)
	for _, q := range []string{"key_prefix=my;app", "keyprefix=x", "layout=sideways", "ttl=-1s", "key_prefix=a{b}", "key_prefix=a&key_prefix=b", "max_batch_bytes=x",
		"wait_replicas=-1", "wait_replicas=x", "wait_timeout=x", "wait_timeout=-1s", "held_conns=x"} {
		dsn := base + "?" + q
		if strings.Contains(base, "?") {
			dsn = base + "&" + q
		}
		_, err := adapters.Open(context.Background(), dsn)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, q)
	}
}

func TestGlobEscape(t *testing.T) {
	require.Equal(t, `a\*b\?c\[d\]e\\f`, globEscape(`a*b?c[d]e\f`))
}

// TestSessionTimes is issue 21.6: the URL store keeps the times a copy
// sets (adapters.Timestamps) in both layouts, native updated_at included,
// and reads them back; in the native layout, whose appends leave the
// metadata alone, updated_at is reported only while the history is the one
// it was set for.
func TestSessionTimes(t *testing.T) {
	for _, layout := range []string{"native", "python"} {
		t.Run(layout, func(t *testing.T) {
			ctx := context.Background()
			st, err := adapters.Open(ctx, withQuery(t, testservers.Redis(t), map[string]string{
				"key_prefix": uniquePrefix(t), "layout": layout}))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			ts, ok := st.(adapters.Timestamps)
			require.True(t, ok)
			created := time.UnixMilli(1_600_000_000_123)
			updated := time.UnixMilli(1_700_000_000_456)
			require.Error(t, ts.SetSessionTimes(ctx, "t", adapters.SessionTimes{Created: created, Updated: updated}), "no such session")
			_, ok, err = ts.SessionTimes(ctx, "t")
			require.NoError(t, err)
			require.False(t, ok)

			s, err := st.Session("t")
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.(*urlStore).RemoveSession(context.Background(), "t") })
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("t", 2)))
			require.NoError(t, ts.SetSessionTimes(ctx, "t", adapters.SessionTimes{Created: created, Updated: updated}))
			got, ok, err := ts.SessionTimes(ctx, "t")
			require.NoError(t, err)
			require.True(t, ok)
			unit := time.Millisecond
			if layout == "python" {
				unit = time.Second
			}
			require.True(t, got.Created.Equal(created.Truncate(unit)), "created: %v", got.Created)
			require.True(t, got.Updated.Equal(updated.Truncate(unit)), "updated: %v", got.Updated)
			summaryUpdated := func() time.Time {
				sums, err := st.(adapters.Summarizer).SummarizeSessions(ctx, []string{"t"}, nil)
				require.NoError(t, err)
				return sums[0].Updated
			}
			require.True(t, summaryUpdated().Equal(got.Updated), "a page's summary reads the time SessionTimes reads")

			// zero times are left as they are
			require.NoError(t, ts.SetSessionTimes(ctx, "t", adapters.SessionTimes{Created: created.Add(time.Hour)}))
			got, _, err = ts.SessionTimes(ctx, "t")
			require.NoError(t, err)
			require.True(t, got.Created.Equal(created.Add(time.Hour).Truncate(unit)))
			require.True(t, got.Updated.Equal(updated.Truncate(unit)))

			before := time.Now().Truncate(time.Second)
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("u", 1)))
			got, ok, err = ts.SessionTimes(ctx, "t")
			require.NoError(t, err)
			require.True(t, ok)
			require.True(t, got.Created.Equal(created.Add(time.Hour).Truncate(unit)), "an append keeps created_at")
			if layout == "python" {
				require.False(t, got.Updated.Before(before), "Python's append stamps updated_at: %v", got.Updated)
			} else {
				require.True(t, got.Updated.IsZero(), "the native append does not stamp updated_at: the one set is stale, so unknown")
			}
			require.True(t, summaryUpdated().Equal(got.Updated), "after an append, a page's summary reads the time SessionTimes reads")
		})
	}
}
