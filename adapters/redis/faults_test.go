package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

func privateServer(t *testing.T) *testservers.RedisServer { return testservers.NewRedisServer(t) }

// faultClient has short timeouts and few retries, so calls fail fast while
// the server is down.
func faultClient(t *testing.T, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{
		Addr:            addr,
		DialTimeout:     200 * time.Millisecond,
		ReadTimeout:     500 * time.Millisecond,
		WriteTimeout:    500 * time.Millisecond,
		PoolTimeout:     time.Second,
		MaxRetries:      1,
		MinRetryBackoff: 10 * time.Millisecond,
		MaxRetryBackoff: 50 * time.Millisecond,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const faultBatch = 5

func faultItems(w, b int) []session.Item {
	out := make([]session.Item, faultBatch)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{"w":%d,"b":%d,"i":%d}`, w, b, i))
	}
	return out
}

type faultKey struct{ w, b, i int }

// TestFaultsServerDown stops (gracefully, then by SIGKILL) the server
// while writers append, twice per run: calls fail while it is down,
// succeed after it is back, and every batch is afterwards present wholly
// and once, or not at all; every acknowledged batch is present.
func TestFaultsServerDown(t *testing.T) {
	for _, mode := range []string{"stop", "kill"} {
		t.Run(mode, func(t *testing.T) {
			srv := privateServer(t)
			c := faultClient(t, srv.Addr())
			st := newStore(t, c, Options{KeyPrefix: "faults"})
			s, err := st.Session("f")
			require.NoError(t, err)
			ctx := context.Background()

			const writers = 8
			type result struct{ acked, failed []int }
			results := make([]result, writers)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for b := 0; ; b++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := s.AddItems(ctx, faultItems(w, b)); err != nil {
							results[w].failed = append(results[w].failed, b)
							time.Sleep(5 * time.Millisecond)
							continue
						}
						results[w].acked = append(results[w].acked, b)
					}
				}()
			}

			for cycle := range 2 {
				time.Sleep(300 * time.Millisecond)
				if mode == "kill" {
					srv.Kill()
				} else {
					srv.Stop()
				}
				// While it is down, every kind of call fails with an error.
				_, err := s.Items(ctx)
				assert.Error(t, err, "cycle %d: read while down", cycle)
				_, err = s.LatestItems(ctx, 3)
				assert.Error(t, err, "cycle %d: latest while down", cycle)
				assert.Error(t, s.AddItems(ctx, faultItems(99, cycle)), "cycle %d: append while down", cycle)
				_, _, err = s.PopItem(ctx)
				assert.Error(t, err, "cycle %d: pop while down", cycle)
				time.Sleep(300 * time.Millisecond)
				srv.Start()
			}
			time.Sleep(300 * time.Millisecond)
			close(stop)
			wg.Wait()

			// Back up: calls succeed again.
			require.Eventually(t, func() bool {
				_, err := s.Items(ctx)
				return err == nil
			}, 5*time.Second, 50*time.Millisecond)
			got, err := s.Items(ctx)
			require.NoError(t, err)

			present := map[[2]int]bool{}
			for i := 0; i < len(got); {
				var k faultKey
				require.NoError(t, json.Unmarshal(got[i].Bytes(), &struct {
					W *int `json:"w"`
					B *int `json:"b"`
					I *int `json:"i"`
				}{&k.w, &k.b, &k.i}))
				require.Equal(t, 0, k.i, "item %d starts a batch part-way (%+v)", i, k)
				require.LessOrEqual(t, i+faultBatch, len(got), "batch %+v cut short at the end", k)
				for j := 0; j < faultBatch; j++ {
					require.Equal(t, string(faultItems(k.w, k.b)[j].Bytes()), got[i+j].String(),
						"batch w=%d b=%d is not whole and contiguous", k.w, k.b)
				}
				id := [2]int{k.w, k.b}
				require.False(t, present[id], "batch w=%d b=%d stored twice", k.w, k.b)
				present[id] = true
				i += faultBatch
			}
			var acked, failed, failedLanded int
			for w, r := range results {
				acked += len(r.acked)
				failed += len(r.failed)
				for _, b := range r.acked {
					require.True(t, present[[2]int{w, b}], "acknowledged batch w=%d b=%d is missing", w, b)
				}
				for _, b := range r.failed {
					if present[[2]int{w, b}] {
						failedLanded++
					}
				}
			}
			require.Positive(t, acked)
			require.Positive(t, failed, "the server went down while writers ran")
			t.Logf("%s: %d batches acknowledged (all present), %d failed (%d of them landed: outcome unknown to the caller, but whole), %d items read back, none partial or duplicated",
				mode, acked, failed, failedLanded, len(got))
		})
	}
}
