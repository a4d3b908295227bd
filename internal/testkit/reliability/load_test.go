package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

const (
	envLoadDSN      = "RELIABILITY_LOAD_DSN"
	envLoadProc     = "RELIABILITY_LOAD_PROC"
	envLoadSessions = "RELIABILITY_LOAD_SESSIONS"
	// EnvLoadDuration bounds each process's load (default 1.5s).
	EnvLoadDuration = "RELIABILITY_LOAD_DURATION"
)

const loadGoroutines = 16

// loadStats is what one load process reports on its last line.
type loadStats struct {
	Acked     map[string]int  `json:"acked"` // acknowledged batches per session
	Errors    int             `json:"errors"`
	Latencies []time.Duration `json:"latencies"`
}

func loadDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EnvLoadDuration)); err == nil && d > 0 {
		return d
	}
	return 1500 * time.Millisecond
}

// loadProcess runs 16 goroutines appending 2-item batches for the load
// duration, spreading them over the given number of sessions.
func loadProcess(ctx context.Context, dsn, proc string, sessions int) (loadStats, error) {
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		return loadStats{}, err
	}
	defer st.Close()
	stats := loadStats{Acked: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	end := time.Now().Add(loadDuration())
	for g := range loadGoroutines {
		wg.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				id := "load-" + strconv.Itoa((g+n*loadGoroutines)%sessions)
				s, err := st.Session(id)
				if err != nil {
					mu.Lock()
					stats.Errors++
					mu.Unlock()
					continue
				}
				items := []string{
					fmt.Sprintf(`{"role":"user","content":"%s g%d n%d"}`, proc, g, n),
					fmt.Sprintf(`{"type":"message","role":"assistant","content":"%s g%d n%d"}`, proc, g, n),
				}
				its, _ := sessionItems(items)
				began := time.Now()
				err = s.AddItems(ctx, its)
				lat := time.Since(began)
				mu.Lock()
				if err != nil {
					stats.Errors++
				} else {
					stats.Acked[id]++
					stats.Latencies = append(stats.Latencies, lat)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return stats, nil
}

// TestLoadProcess is the second process of the load test.
func TestLoadProcess(t *testing.T) {
	dsn := os.Getenv(envLoadDSN)
	if dsn == "" {
		t.Skip("only run as the load test's second process")
	}
	n, _ := strconv.Atoi(os.Getenv(envLoadSessions))
	stats, err := loadProcess(context.Background(), dsn, os.Getenv(envLoadProc), n)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(stats)
	fmt.Println("STATS " + string(b))
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*p)]
}

// runTwoProcessLoad runs the load in this process and a second one on dsn
// at once and checks that every session holds exactly the acknowledged
// batches, each whole.
func runTwoProcessLoad(t *testing.T, name, dsn string, sessions int) {
	ctx := context.Background()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envLoadDSN+"="+dsn, envLoadProc+"=p2", envLoadSessions+"="+strconv.Itoa(sessions))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	mine, err := loadProcess(ctx, dsn, "p1", sessions)
	require.NoError(t, err)
	var theirs loadStats
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "STATS "); ok {
			require.NoError(t, json.Unmarshal([]byte(line), &theirs))
		}
	}
	require.NoError(t, cmd.Wait(), stderr.String())
	require.NotNil(t, theirs.Acked, "the second process reported")

	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	total, extra := 0, 0
	for i := range sessions {
		id := "load-" + strconv.Itoa(i)
		s, err := st.Session(id)
		require.NoError(t, err)
		items, err := s.Items(ctx)
		require.NoError(t, err)
		require.Zero(t, len(items)%2, "%s: whole batches only", id)
		for j := 0; j < len(items); j += 2 {
			require.Equal(t, items[j].String()[len(`{"role":"user","content":`):], items[j+1].String()[len(`{"type":"message","role":"assistant","content":`):],
				"%s: batch at %d is contiguous", id, j)
		}
		want := mine.Acked[id] + theirs.Acked[id]
		got := len(items) / 2
		require.GreaterOrEqual(t, got, want, "%s: no acknowledged batch lost", id)
		extra += got - want // batches whose acknowledgement was an error
		total += got
	}
	require.Zero(t, extra, "with no fault injected, every stored batch was acknowledged and every acknowledged one stored")
	lat := append(mine.Latencies, theirs.Latencies...)
	t.Logf("load %s, %d sessions: 2 processes x %d goroutines, batches=%d errors=%d p50=%v p99=%v",
		name, sessions, loadGoroutines, total, mine.Errors+theirs.Errors, percentile(lat, 0.5), percentile(lat, 0.99))
	require.Zero(t, mine.Errors+theirs.Errors)
}

func TestTwoProcessLoad(t *testing.T) {
	backends := []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "load.db") }},
		{"redis", func(t *testing.T) string {
			return testservers.Redis(t) + "?key_prefix=" + uniq("load")
		}},
		{"redis-cluster", func(t *testing.T) string {
			return "redis+cluster://" + strings.Join(testservers.RedisCluster(t), ",") + "?key_prefix=" + uniq("load")
		}},
		{"mongo", networked[1].url},
	}
	for _, b := range backends {
		for _, sessions := range []int{1, 1000} {
			t.Run(fmt.Sprintf("%s/%d-sessions", b.name, sessions), func(t *testing.T) {
				if b.name == "mongo" && sessions == 1000 {
					// The Mongo-wire test server scans a collection per
					// query; a thousand sessions' reads take minutes.
					sessions = 50
				}
				runTwoProcessLoad(t, b.name, b.dsn(t), sessions)
			})
		}
	}
}
