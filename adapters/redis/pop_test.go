package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// popLayouts are the deployments and layouts PopItem is tested on.
var popLayouts = []struct {
	name   string
	client func(testing.TB) goredis.UniversalClient
	layout Layout
}{
	{"standalone", standaloneClient, LayoutNative},
	{"cluster", func(tb testing.TB) goredis.UniversalClient { return clusterClient(tb) }, LayoutNative},
	{"python-layout", standaloneClient, LayoutPython},
}

// unreadable are records this library cannot read, as damaged or foreign
// writers leave them: not JSON, Python's repr of a dict (shaped like an
// object), JSON that is no object, truncated JSON, invalid UTF-8.
var unreadable = []string{"not json", "{'a': 1}", "[1,2]", `{"x":`, "{\"k\":\"\xff\xfe\"}"}

// TestPopKeepsUnreadable is issue 9.4: PopItem pops the newest valid item
// and never deletes an unreadable record above it: the records stay, byte
// for byte and in place, and are reported; with no valid item left,
// nothing is removed.
func TestPopKeepsUnreadable(t *testing.T) {
	for _, tc := range popLayouts {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			var col driver.CorruptLog
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout, OnCorrupt: col.Handler()})
			s, err := st.Session("pop")
			require.NoError(t, err)
			v := conformance.Numbered("v", 3)
			require.NoError(t, s.AddItems(ctx, v[:2]))
			require.NoError(t, c.RPush(ctx, s.Keys()[0], unreadable[0]).Err())
			require.NoError(t, s.AddItems(ctx, v[2:]))
			for _, r := range unreadable[1:] {
				require.NoError(t, c.RPush(ctx, s.Keys()[0], r).Err())
			}
			list := func() []string {
				got, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
				require.NoError(t, err)
				return got
			}

			it, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, v[2].String(), it.String(), "the newest valid item")
			want := append(append(texts(v[:2]), unreadable[0]), unreadable[1:]...)
			require.Equal(t, want, list(), "only the item went; the unreadable records above it stay, byte for byte")
			reps := col.Reports("pop")
			require.Len(t, reps, len(unreadable)-1, "each unreadable record above the item is reported")
			for i, r := range reps {
				require.Equal(t, unreadable[i+1], string(r.Raw))
				require.Contains(t, r.Position, "kept")
			}

			it, ok, err = s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, v[1].String(), it.String())
			it, ok, err = s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, v[0].String(), it.String())
			require.Equal(t, unreadable, list(), "every unreadable record is still there, in order")

			_, ok, err = s.PopItem(ctx)
			require.NoError(t, err)
			require.False(t, ok, "no valid item left: an empty session")
			require.Equal(t, unreadable, list(), "and nothing was removed")
		})
	}
}

// TestPopKeepsExpiry: when the item popped sits under unreadable records
// only, the script empties the list and pushes them back; the list keeps
// the expiry a foreign writer (Python's EXPIRE) gave it.
func TestPopKeepsExpiry(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("e")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, conformance.Numbered("e", 1)))
	require.NoError(t, c.RPush(ctx, s.Keys()[0], "garbage").Err())
	require.NoError(t, c.Expire(ctx, s.Keys()[0], time.Hour).Err())
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"garbage"}, got)
	d, err := c.PTTL(ctx, s.Keys()[0]).Result()
	require.NoError(t, err)
	require.Greater(t, d, 59*time.Minute)
}

// TestPopUnsureKeepsExpiry: the pop script pops first and pushes back a
// record its check is not sure of; when that record was the list's only
// one, the pop deleted the key, and the push-back must give the list its
// expiry again: never earlier, never lost. Covered: an unreadable record
// (pushed back, nothing popped) and a readable one the check is not sure
// of (pushed back, then popped by the client's compare-and-pop), each the
// only record of a list with an expiry a foreign writer set.
func TestPopUnsureKeepsExpiry(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	var col driver.CorruptLog
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), OnCorrupt: col.Handler()})
	s, err := st.Session("ue")
	require.NoError(t, err)
	key := s.Keys()[0]
	expireAt := func() int64 {
		ms, err := c.Do(ctx, "pexpiretime", key).Int64()
		require.NoError(t, err)
		return ms
	}
	require.NoError(t, c.RPush(ctx, key, "garbage").Err())
	at := time.Now().Add(time.Hour).UnixMilli()
	require.NoError(t, c.PExpireAt(ctx, key, time.UnixMilli(at)).Err())
	for range 3 {
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		got, err := c.LRange(ctx, key, 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, []string{"garbage"}, got)
		now := expireAt()
		require.GreaterOrEqual(t, now, at, "the expiry came earlier")
		require.Less(t, now, at+60_000, "the expiry moved by more than the script's run")
	}
	require.NoError(t, c.Del(ctx, key).Err())
	unsure := `{"a":"\ud800"}`
	require.NoError(t, c.RPush(ctx, key, "garbage", unsure).Err())
	require.NoError(t, c.PExpireAt(ctx, key, time.UnixMilli(at)).Err())
	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, unsure, it.String())
	got, err := c.LRange(ctx, key, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"garbage"}, got)
	require.GreaterOrEqual(t, expireAt(), at)
	require.NoError(t, c.Del(ctx, key).Err())
	require.NoError(t, c.RPush(ctx, key, unsure).Err())
	require.NoError(t, c.PExpireAt(ctx, key, time.UnixMilli(at)).Err())
	it, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, unsure, it.String())
	n, err := c.Exists(ctx, key).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestPopConcurrent: poppers racing appenders on one session: every item
// appended is either popped exactly once or still stored, never both, never
// lost, and unreadable records survive every pop.
func TestPopConcurrent(t *testing.T) {
	for _, tc := range popLayouts {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.client(t)
			var col driver.CorruptLog
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t), Layout: tc.layout, OnCorrupt: col.Handler()})
			s, err := st.Session("race")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, conformance.Numbered("seed", 1)))
			require.NoError(t, c.RPush(ctx, s.Keys()[0], "junk-1").Err())

			const writers, poppers, batches = 3, 3, 30
			var wg sync.WaitGroup
			var mu sync.Mutex
			popped := map[string]int{}
			stop := make(chan struct{})
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for b := range batches {
						items := []session.Item{
							session.MustItem(fmt.Sprintf(`{"w":%d,"b":%d,"i":0}`, w, b)),
							session.MustItem(fmt.Sprintf(`{"w":%d,"b":%d,"i":1}`, w, b)),
						}
						if err := s.AddItems(ctx, items); err != nil {
							t.Error(err)
							return
						}
						if b%10 == 0 {
							if err := c.RPush(ctx, s.Keys()[0], fmt.Sprintf("junk-%d-%d", w, b)).Err(); err != nil {
								t.Error(err)
								return
							}
						}
					}
				}()
			}
			var pwg sync.WaitGroup
			for range poppers {
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						it, ok, err := s.PopItem(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							mu.Lock()
							popped[it.String()]++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			// let the poppers go on until they have taken a good share
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := len(popped)
				mu.Unlock()
				if n >= 80 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			close(stop)
			pwg.Wait()

			rest, err := c.LRange(ctx, s.Keys()[0], 0, -1).Result()
			require.NoError(t, err)
			stored := map[string]int{}
			junk := 0
			for _, r := range rest {
				if strings.HasPrefix(r, "junk-") {
					junk++
					continue
				}
				stored[r]++
			}
			require.Equal(t, 1+writers*(batches/10), junk, "no unreadable record was removed")
			all := []string{conformance.Numbered("seed", 1)[0].String()}
			for w := range writers {
				for b := range batches {
					for i := range 2 {
						all = append(all, fmt.Sprintf(`{"w":%d,"b":%d,"i":%d}`, w, b, i))
					}
				}
			}
			for _, it := range all {
				require.Equal(t, 1, popped[it]+stored[it], "%s: popped %d times, stored %d times", it, popped[it], stored[it])
			}
			t.Logf("%d items popped, %d left, %d unreadable records kept", len(popped), len(stored), junk)
		})
	}
}
