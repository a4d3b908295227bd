package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

func TestOptions(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for _, tc := range []struct {
		name string
		opts Options
		err  bool
	}{
		{"zero value", Options{}, false},
		{"prefix with {", Options{KeyPrefix: "a{b"}, true},
		{"prefix with }", Options{KeyPrefix: "a}b"}, true},
		{"negative TTL", Options{TTL: -time.Second}, true},
		{"unknown layout", Options{Layout: Layout(7)}, true},
		{"python layout", Options{Layout: LayoutPython}, false},
		{"native at the Python default prefix", Options{KeyPrefix: DefaultPythonKeyPrefix}, true},
		{"native under the Python default prefix", Options{KeyPrefix: DefaultPythonKeyPrefix + ":app"}, true},
		{"python at the native default prefix", Options{Layout: LayoutPython, KeyPrefix: DefaultKeyPrefix}, true},
		{"python over the native default prefix", Options{Layout: LayoutPython, KeyPrefix: "agents"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := New(c, tc.opts)
			if tc.err {
				require.ErrorIs(t, err, ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			want := DefaultKeyPrefix
			if tc.opts.Layout == LayoutPython {
				want = DefaultPythonKeyPrefix
			}
			assert.Equal(t, want, st.Options().KeyPrefix)
			assert.Equal(t, DefaultMaxBatchBytes, st.Options().MaxBatchBytes)
		})
	}
	_, err := New(nil, Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)

	st, err := New(c, Options{TTL: 1500 * time.Microsecond})
	require.NoError(t, err)
	s, err := st.Session("x")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Millisecond, s.TTL(), "rounded up to whole milliseconds")
	_, err = st.Session("")
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
}

func TestBatchLimits(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	items := conformance.Numbered("m", 4) // 4 items of equal size
	size := 0
	for _, it := range items {
		size += len(it.Bytes())
	}
	for _, tc := range []struct {
		name string
		max  int
		ok   bool
	}{
		{"exactly at the limit", size, true},
		{"one byte over", size - 1, false},
		{"no limit", -1, true},
		{"default limit", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), MaxBatchBytes: tc.max})
			s, err := st.Session("b")
			require.NoError(t, err)
			err = s.AddItems(ctx, items)
			rerr := s.ReplaceItems(ctx, items)
			if tc.ok {
				require.NoError(t, err)
				require.NoError(t, rerr)
				return
			}
			require.ErrorIs(t, err, session.ErrBatchTooLarge)
			require.ErrorIs(t, rerr, session.ErrBatchTooLarge)
			n, err := c.Exists(ctx, s.Keys()...).Result()
			require.NoError(t, err)
			require.Zero(t, n, "a refused batch writes nothing, metadata included")
		})
	}
	t.Run("invalid item", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
		s, err := st.Session("b")
		require.NoError(t, err)
		err = s.AddItems(ctx, []session.Item{items[0], {}})
		require.ErrorIs(t, err, session.ErrInvalidItem)
		n, err := c.Exists(ctx, s.Keys()...).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// TestWrongTypeWritesNothing: a key of the session holding another type
// makes the write fail before any item is pushed.
func TestWrongTypeWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("wt")
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, s.Keys()[1], "not a hash", 0).Err())
	require.Error(t, s.AddItems(ctx, conformance.Numbered("x", 3)))
	require.Error(t, s.ReplaceItems(ctx, conformance.Numbered("x", 3)))
	n, err := c.Exists(ctx, s.Keys()[0]).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no item was pushed")

	// Once the session exists an append does not touch the metadata: a
	// clobbered metadata key is left as it is, and the batch lands whole.
	s3, err := st.Session("wt3")
	require.NoError(t, err)
	require.NoError(t, s3.AddItems(ctx, conformance.Numbered("y", 1)))
	require.NoError(t, c.Set(ctx, s3.Keys()[1], "not a hash", 0).Err())
	require.NoError(t, s3.AddItems(ctx, conformance.Numbered("z", 3)))
	got, err := s3.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(append(conformance.Numbered("y", 1), conformance.Numbered("z", 3)...)), texts(got))
	v3, err := c.Get(ctx, s3.Keys()[1]).Result()
	require.NoError(t, err)
	require.Equal(t, "not a hash", v3)

	s2, err := st.Session("wt2")
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, s2.Keys()[0], "not a list", 0).Err())
	require.Error(t, s2.AddItems(ctx, conformance.Numbered("x", 3)))
	v, err := c.Get(ctx, s2.Keys()[0]).Result()
	require.NoError(t, err)
	require.Equal(t, "not a list", v)
}

func TestCloseAndOwnership(t *testing.T) {
	ctx := context.Background()
	t.Run("injected client stays open", func(t *testing.T) {
		c := standaloneClient(t)
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
		s, err := st.Session("c")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, conformance.Numbered("c", 1)))
		require.NoError(t, st.Close())
		require.NoError(t, st.Close(), "Close is idempotent")
		require.NoError(t, c.Ping(ctx).Err(), "the caller's client is not closed")
		checkClosed(t, st, s)
	})
	t.Run("opened client is closed", func(t *testing.T) {
		st, err := Open(ctx, testservers.Redis(t), Options{KeyPrefix: uniquePrefix(t)})
		require.NoError(t, err)
		s, err := st.Session("c")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, conformance.Numbered("c", 1)))
		require.NoError(t, st.Close())
		require.ErrorIs(t, st.Client().Ping(ctx).Err(), goredis.ErrClosed)
		checkClosed(t, st, s)
	})
}

func checkClosed(t *testing.T, st *Store, s *Session) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Session("other")
	assert.ErrorIs(t, err, session.ErrClosed)
	assert.ErrorIs(t, st.Ping(ctx), session.ErrClosed)
	assert.ErrorIs(t, st.LoadScripts(ctx), session.ErrClosed)
	assert.ErrorIs(t, s.AddItems(ctx, conformance.Numbered("x", 1)), session.ErrClosed)
	assert.ErrorIs(t, s.AddItems(ctx, nil), session.ErrClosed, "even an empty batch")
	_, err = s.Items(ctx)
	assert.ErrorIs(t, err, session.ErrClosed)
	_, err = s.LatestItems(ctx, 1)
	assert.ErrorIs(t, err, session.ErrClosed)
	_, _, err = s.PopItem(ctx)
	assert.ErrorIs(t, err, session.ErrClosed)
	assert.ErrorIs(t, s.Clear(ctx), session.ErrClosed)
	assert.ErrorIs(t, s.ReplaceItems(ctx, nil), session.ErrClosed)
	assert.ErrorIs(t, s.Touch(ctx), session.ErrClosed)
	_, _, err = s.ExpiresIn(ctx)
	assert.ErrorIs(t, err, session.ErrClosed)
}

func TestCancelledContext(t *testing.T) {
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: time.Minute})
	s, err := st.Session("cx")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, s.AddItems(ctx, nil), context.Canceled, "even an empty batch checks the context")
	assert.ErrorIs(t, s.Touch(ctx), context.Canceled)
	_, _, err = s.ExpiresIn(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.LatestItems(ctx, 0)
	assert.ErrorIs(t, err, context.Canceled)
	n, err := c.Exists(context.Background(), s.Keys()...).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestTTL(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	const ttl = time.Second
	t.Run("all keys expire together", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl})
		s, err := st.Session("t")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 2)))
		for _, k := range s.Keys() {
			d, err := c.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.True(t, d > 0 && d <= ttl, "%s: %v", k, d)
		}
		d, ok, err := s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, d > 0 && d <= ttl, "%v", d)
		time.Sleep(ttl + 200*time.Millisecond)
		n, err := c.Exists(ctx, s.Keys()...).Result()
		require.NoError(t, err)
		require.Zero(t, n, "items and metadata are gone together")
		_, ok, err = s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.False(t, ok)
	})
	t.Run("no TTL", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
		s, err := st.Session("t")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 2)))
		_, ok, err := s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, s.Touch(ctx), "a no-op")
		for _, k := range s.Keys() {
			d, err := c.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), d, "%s has no expiry", k)
		}
	})
	for _, refresh := range []bool{false, true} {
		name := map[bool]string{false: "reads do not refresh", true: "RefreshOnRead"}[refresh]
		t.Run(name, func(t *testing.T) {
			// Margins of 0.8 s either way, for a loaded machine: the read
			// comes 1.2 s into a 2 s TTL, the check 1.2 s after it (past the
			// first expiry, well before a refreshed one).
			const ttl = 2 * time.Second
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl, RefreshOnRead: refresh})
			s, err := st.Session("t")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 2)))
			time.Sleep(1200 * time.Millisecond)
			_, err = s.LatestItems(ctx, 1)
			require.NoError(t, err)
			time.Sleep(1200 * time.Millisecond)
			got, err := s.Items(ctx)
			require.NoError(t, err)
			if refresh {
				require.Len(t, got, 2, "the read refreshed the expiry")
			} else {
				require.Empty(t, got, "the read did not refresh the expiry")
			}
		})
	}
	t.Run("pop refreshes", func(t *testing.T) {
		st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), TTL: ttl})
		s, err := st.Session("t")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 3)))
		time.Sleep(600 * time.Millisecond)
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(600 * time.Millisecond)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 2)
	})
}

func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	url := testservers.Redis(t)
	addrs := testservers.RedisCluster(t)
	for _, tc := range []struct {
		name string
		url  string
	}{
		{"standalone", url},
		{"cluster, comma-separated seeds", "redis+cluster://" + strings.Join(addrs, ",")},
		{"cluster, addr parameters", "redis+cluster://" + addrs[0] + "?addr=" + addrs[1] + "&dial_timeout=2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := Open(ctx, tc.url, Options{KeyPrefix: uniquePrefix(t)})
			require.NoError(t, err)
			defer st.Close()
			if strings.Contains(tc.url, "cluster") {
				require.IsType(t, &goredis.ClusterClient{}, st.Client())
			}
			s, err := st.Session("u")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("u", 2)))
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Len(t, got, 2)
			require.NoError(t, s.Clear(ctx))
		})
	}
	t.Run("python layout on a cluster URL", func(t *testing.T) {
		_, err := Open(ctx, "redis+cluster://"+strings.Join(addrs, ","), Options{Layout: LayoutPython})
		require.ErrorIs(t, err, ErrClusterLayout)
	})
	for _, bad := range []string{
		"", "localhost:6379", "http://localhost", "redis+ring://a:1", "redis+cluster://a:1,,b:2",
		"redis+sentinel://127.0.0.1:1", "redis://localhost:6379?bogus=1",
	} {
		t.Run("invalid "+bad, func(t *testing.T) {
			_, err := Open(ctx, bad, Options{})
			require.ErrorIs(t, err, ErrInvalidOptions)
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		_, err := Open(ctx, "redis://user:secret@127.0.0.1:1/0?dial_timeout=100ms&max_retries=-1", Options{})
		require.Error(t, err)
		require.False(t, errors.Is(err, ErrInvalidOptions))
		require.NotContains(t, err.Error(), "secret", "the password is redacted")
	})
}

func TestSeedURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"h1:1", "redis://h1:1"},
		{"h1:1,h2:2,h3:3", "redis://h1:1?addr=h2%3A2&addr=h3%3A3"},
		{"u:p@h1:1,h2:2/0?dial_timeout=3", "redis://u:p@h1:1/0?addr=h2%3A2&dial_timeout=3"},
		{"h1:1,h2:2?addr=h3:3", "redis://h1:1?addr=h3%3A3&addr=h2%3A2"},
	} {
		got, err := seedURL("redis", tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	_, err := seedURL("redis", "h1:1,")
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:1/0":          "redis://u:xxxxx@h:1/0",
		"redis://:secret@h:1":             "redis://:xxxxx@h:1",
		"redis://u@h:1":                   "redis://u@h:1",
		"redis://h:1/0?password=x":        "redis://h:1/0?password=x",
		"redis+cluster://u:p@a:1,b:2?x=1": "redis+cluster://u:xxxxx@a:1,b:2?x=1",
		"nonsense":                        "<invalid URL>",
	} {
		assert.Equal(t, want, redactURL(in), in)
	}
}
