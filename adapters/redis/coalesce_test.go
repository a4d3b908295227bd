package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// TestCoalescedAppends: concurrent appends share pipelines, yet each caller
// gets its own command's result: a batch onto a clobbered key fails only
// its own caller, every other batch lands whole, contiguous and once, and
// pipelines were really used (counted with a hook).
func TestCoalescedAppends(t *testing.T) {
	for name, mk := range bothClients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := mk(t)
			var pipelines, pipelined atomic.Int64
			hook := &pipeCounter{pipelines: &pipelines, cmds: &pipelined}
			if cc, ok := c.(*goredis.ClusterClient); ok {
				cc.OnNewNode(func(n *goredis.Client) { n.AddHook(hook) })
			} else {
				c.(*goredis.Client).AddHook(hook)
			}
			st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
			const goroutines, batches, size = 16, 40, 3
			sessions := make([]*Session, goroutines)
			for g := range sessions {
				var err error
				sessions[g], err = st.Session(fmt.Sprintf("g%d", g%4)) // 4 sessions, 4 writers each
				require.NoError(t, err)
			}
			bad, err := st.Session("clobbered")
			require.NoError(t, err)
			require.NoError(t, c.Set(ctx, bad.Keys()[0], "not a list", 0).Err())

			var wg sync.WaitGroup
			var badFailed, badOK atomic.Int64
			for g := range goroutines {
				wg.Add(2)
				go func() {
					defer wg.Done()
					for b := range batches {
						items := make([]session.Item, size)
						for k := range items {
							items[k] = session.MustItem(fmt.Sprintf(`{"g":%d,"b":%d,"k":%d}`, g, b, k))
						}
						if err := sessions[g].AddItems(ctx, items); err != nil {
							t.Errorf("g%d b%d: %v", g, b, err)
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					for range batches / 4 {
						if err := bad.AddItems(ctx, []session.Item{session.MustItem(`{"bad":true}`)}); err != nil {
							if !strings.Contains(err.Error(), "WRONGTYPE") {
								t.Errorf("clobbered key: %v", err)
							}
							badFailed.Add(1)
						} else {
							badOK.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			require.Zero(t, badOK.Load(), "every append onto the clobbered key failed")
			require.Equal(t, int64(goroutines*batches/4), badFailed.Load())
			v, err := c.Get(ctx, bad.Keys()[0]).Result()
			require.NoError(t, err)
			require.Equal(t, "not a list", v)

			seen := map[string]bool{}
			for s := range 4 {
				got, err := sessions[s].Items(ctx)
				require.NoError(t, err)
				require.Len(t, got, 4*batches*size)
				for i := 0; i < len(got); i += size {
					var g, b int
					_, err := fmt.Sscanf(got[i].String(), `{"g":%d,"b":%d,"k":0}`, &g, &b)
					require.NoError(t, err, "record %d starts a batch: %s", i, got[i])
					for k := range size {
						require.Equal(t, fmt.Sprintf(`{"g":%d,"b":%d,"k":%d}`, g, b, k), got[i+k].String())
					}
					key := fmt.Sprintf("%d/%d", g, b)
					require.False(t, seen[key], "batch %s stored twice", key)
					seen[key] = true
				}
			}
			require.Len(t, seen, goroutines*batches)
			t.Logf("%d pipelines carried %d appends", pipelines.Load(), pipelined.Load())
			require.Positive(t, pipelines.Load(), "concurrent appends were pipelined")
		})
	}
}

// pipeCounter counts pipelines of more than one command and their commands.
type pipeCounter struct{ pipelines, cmds *atomic.Int64 }

func (h *pipeCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *pipeCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return next
}
func (h *pipeCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if len(cmds) > 1 && cmds[0].Name() == "rpushx" {
			h.pipelines.Add(1)
			h.cmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// TestCoalescedManyCallers: more callers than one pipeline takes, some with
// batches too big to join one: every batch lands once.
func TestCoalescedManyCallers(t *testing.T) {
	ctx := context.Background()
	c := standaloneClient(t)
	st := newStore(t, c, Options{KeyPrefix: uniquePrefix(t)})
	s, err := st.Session("many")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"first":true}`)}))
	const callers, each = 300, 4
	big := strings.Repeat("x", maxPipelinedBytes)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range each {
				raw := fmt.Sprintf(`{"g":%d,"b":%d}`, g, b)
				if g%50 == 0 && b == 0 {
					raw = fmt.Sprintf(`{"g":%d,"b":%d,"big":%q}`, g, b, big)
				}
				if err := s.AddItems(ctx, []session.Item{session.MustItem(raw)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1+callers*each)
	seen := map[string]bool{}
	for _, it := range got[1:] {
		var g, b int
		_, err := fmt.Sscanf(it.String(), `{"g":%d,"b":%d`, &g, &b)
		require.NoError(t, err)
		key := fmt.Sprintf("%d/%d", g, b)
		require.False(t, seen[key], key)
		seen[key] = true
	}
	require.Len(t, seen, callers*each)
}
