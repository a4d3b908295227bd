package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// loadResult is what one load run saw, for the campaign's table.
type loadResult struct {
	acked, failed, present, lost, duplicated, interleaved int
}

// batch makes writer w's n-th batch of five items; each item names its
// writer, batch and position.
func batch(w, n int) []session.Item {
	out := make([]session.Item, 5)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{"role":"user","content":"w%d b%d i%d","w":%d,"b":%d,"i":%d}`, w, n, i, w, n, i))
	}
	return out
}

// runLoad has writers append batches to sessions (writer w writes session
// w % len(ids)) until stop is closed, then checks every session: each batch
// whole and contiguous or absent, none twice, every acknowledged one
// present.
func runLoad(t *testing.T, st adapters.Store, check adapters.Store, ids []string, writers int, stop <-chan struct{}) loadResult {
	t.Helper()
	ctx := context.Background()
	type key struct{ w, b int }
	var (
		mu    sync.Mutex
		acked = map[key]bool{}
		res   loadResult
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := st.Session(ids[w%len(ids)])
			if err != nil {
				t.Error(err)
				return
			}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := s.AddItems(actx, batch(w, n))
				cancel()
				mu.Lock()
				if err == nil {
					acked[key{w, n}] = true
					res.acked++
				} else {
					res.failed++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()

	seen := map[key]int{}
	for _, id := range ids {
		s, err := check.Session(id)
		require.NoError(t, err)
		items, err := s.Items(ctx)
		require.NoError(t, err)
		for i := 0; i < len(items); {
			var first struct{ W, B, I int }
			require.NoError(t, json.Unmarshal(items[i].Bytes(), &first))
			if first.I != 0 || i+5 > len(items) {
				res.interleaved++
				i++
				continue
			}
			whole := true
			for j := 1; j < 5; j++ {
				var it struct{ W, B, I int }
				require.NoError(t, json.Unmarshal(items[i+j].Bytes(), &it))
				if it.W != first.W || it.B != first.B || it.I != j {
					whole = false
				}
			}
			if !whole {
				res.interleaved++
				i++
				continue
			}
			seen[key{first.W, first.B}]++
			i += 5
		}
	}
	for k, n := range seen {
		res.present++
		if n > 1 {
			res.duplicated += n - 1
		}
		_ = k
	}
	for k := range acked {
		if seen[k] == 0 {
			res.lost++
		}
	}
	return res
}

// goroutinesSettle waits for the goroutine count to come back to at most
// base after the stores were closed; a leak keeps it above.
func goroutinesSettle(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestRedisRestartUnderLoad kills and restarts a durable redis-server
// (appendfsync always) under load; see restartUnderLoad.
func TestRedisRestartUnderLoad(t *testing.T) {
	srv := testservers.NewRedisServer(t)
	restartUnderLoad(t, "redis", srv, srv.URL()+"?dial_timeout=500ms&read_timeout=1s&write_timeout=1s", srv.URL(), []string{"a", "b", "c"})
}

// TestMongoRestartUnderLoad kills and restarts a private FerretDB (SQLite
// backend) under load; see restartUnderLoad.
func TestMongoRestartUnderLoad(t *testing.T) {
	srv := testservers.NewFerretDB(t)
	restartUnderLoad(t, "mongo", srv, srv.URI()+"?serverSelectionTimeoutMS=1000&connectTimeoutMS=500", srv.URI(), []string{"a", "b"})
}

// restartable is a private test server that a test may crash and restart.
type restartable interface {
	Kill()  // SIGKILL, as a crash would
	Stop()  // graceful
	Start() // again, on the same port and data
}

// restartUnderLoad has 8 writers append through a store opened on url
// (with short timeouts) to the sessions ids, while srv is killed (SIGKILL)
// and started again, then stopped gracefully and started again: errors
// while it is down, full service after, no partial or duplicated batch,
// nothing acknowledged lost (checked through a store on checkURL), no
// goroutine left behind.
func restartUnderLoad(t *testing.T, name string, srv restartable, url, checkURL string, ids []string) {
	t.Helper()
	base := runtime.NumGoroutine()
	ctx := context.Background()
	st, err := adapters.Open(ctx, url)
	require.NoError(t, err)
	check, err := adapters.Open(ctx, checkURL)
	require.NoError(t, err)
	stop := make(chan struct{})
	go func() {
		// Closed even if Start fails (its Fatalf ends this goroutine), so
		// that the writers stop and the test reports the failure.
		defer close(stop)
		time.Sleep(700 * time.Millisecond)
		srv.Kill()
		time.Sleep(400 * time.Millisecond)
		srv.Start()
		time.Sleep(700 * time.Millisecond)
		srv.Stop()
		time.Sleep(300 * time.Millisecond)
		srv.Start()
		time.Sleep(700 * time.Millisecond)
	}()
	res := runLoad(t, st, check, ids, 8, stop)
	t.Logf("%s restart: acked=%d failed=%d present=%d lost=%d duplicated=%d interleaved=%d",
		name, res.acked, res.failed, res.present, res.lost, res.duplicated, res.interleaved)
	require.Positive(t, res.failed, "the writers saw the server down")
	require.Zero(t, res.lost)
	require.Zero(t, res.duplicated)
	require.Zero(t, res.interleaved)
	// Full service after the restarts.
	s, err := st.Session("after")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, batch(99, 0)))
	require.NoError(t, st.Close())
	require.NoError(t, check.Close())
	goroutinesSettle(t, base)
}

// TestMongoConnectionsDropUnderLoad cuts every connection to the Mongo-wire
// server and refuses new ones for a while, with the server itself running
// throughout (what a client sees of a network cut, or of a restart it
// cannot tell from one; TestMongoRestartUnderLoad restarts the server
// itself), while 8 writers append.
func TestMongoConnectionsDropUnderLoad(t *testing.T) {
	direct := networked[1].url(t)
	proxied, proxy := viaProxy(t, direct)
	base := runtime.NumGoroutine()
	ctx := context.Background()
	st, err := adapters.Open(ctx, proxied+"?serverSelectionTimeoutMS=1000&connectTimeoutMS=500")
	require.NoError(t, err)
	check, err := adapters.Open(ctx, direct)
	require.NoError(t, err)
	stop := make(chan struct{})
	go func() {
		time.Sleep(700 * time.Millisecond)
		proxy.Set(faultproxy.Refuse, nil)
		proxy.CloseAll()
		time.Sleep(1500 * time.Millisecond)
		proxy.Set(faultproxy.None, nil)
		time.Sleep(1500 * time.Millisecond)
		close(stop)
	}()
	res := runLoad(t, st, check, []string{"a", "b"}, 8, stop)
	t.Logf("mongo drop: acked=%d failed=%d present=%d lost=%d duplicated=%d interleaved=%d",
		res.acked, res.failed, res.present, res.lost, res.duplicated, res.interleaved)
	require.Positive(t, res.failed, "the writers saw the server unreachable")
	require.Zero(t, res.lost)
	require.Zero(t, res.duplicated)
	require.Zero(t, res.interleaved)
	s, err := st.Session("after")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, batch(99, 0)))
	require.NoError(t, st.Close())
	require.NoError(t, check.Close())
	goroutinesSettle(t, base)
}
