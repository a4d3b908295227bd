package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

func TestMain(m *testing.M) { testservers.Main(m) }

const (
	envChild = "CRASHTEST_CHILD_DSN"
	envPath  = "CRASHTEST_CHILD_CHECKPOINT"
	envSeed  = "CRASHTEST_CHILD_SEED"
	envAcks  = "CRASHTEST_CHILD_ACKS"
	// EnvKills sets the number of kills per backend (default 40).
	EnvKills = "CRASHTEST_KILLS"
)

// TestChild is the child process: it runs the loop until killed.
func TestChild(t *testing.T) {
	dsn := os.Getenv(envChild)
	if dsn == "" {
		t.Skip("only run as the crash loop's child process")
	}
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Session("crash")
	if err != nil {
		t.Fatal(err)
	}
	acks, err := os.OpenFile(os.Getenv(envAcks), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	err = Child(ctx, s, os.Getenv(envPath), seed, func() { fmt.Println("READY") }, func(k int) error {
		if _, err := fmt.Fprintln(acks, k); err != nil {
			return err
		}
		return acks.Sync()
	})
	t.Fatalf("the loop stopped: %v", err)
}

func kills() int {
	if n, err := strconv.Atoi(os.Getenv(EnvKills)); err == nil && n > 0 {
		return n
	}
	return 40
}

// crashLoop kills a child running on dsn again and again and verifies after
// each kill. With proxied, the child reaches the server through a fault
// proxy, and the parent recovers only once the server has finished the
// requests the dead child had sent: a killed process's request still in
// flight can land after a recovery's read (the crash loop found this on the
// Mongo-wire server), so a recovery must not start while the dead writer's
// connections live. That is the application's part of "serialise access to
// the session" (docs/semantics.md §3.4).
func crashLoop(t *testing.T, dsn string, proxied bool) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	ackPath := filepath.Join(dir, "acked")
	rng := rand.New(rand.NewPCG(20261203, uint64(len(dsn))))
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("crash")
	require.NoError(t, err)
	childDSN := dsn
	var proxy *faultproxy.Proxy
	if proxied {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		proxy, err = faultproxy.Start(u.Host)
		require.NoError(t, err)
		defer proxy.Close()
		u.Host = proxy.Addr()
		childDSN = u.String()
	}
	deadline := time.Now().Add(2 * time.Minute)
	var total Report
	n := kills()
	done := 0
	// The kill lands at a random moment within window of the child's
	// READY. A window that never reaches an acknowledgement (a turn on a
	// slow or loaded backend outlasts it) grows, up to 2 s, so that kills
	// fall all along the loop and the check below has batches to count.
	window := 40 * time.Millisecond
	for ; done < n && time.Now().Before(deadline); done++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChild+"="+childDSN, envPath+"="+path, envSeed+"="+strconv.Itoa(done), envAcks+"="+ackPath)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		ready := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "READY" {
					ready <- true
					return
				}
			}
			ready <- false
		}()
		select {
		case ok := <-ready:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("child %d ended before it was ready: %s", done, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("child %d not ready after 30 s: %s", done, stderr.String())
		}
		time.Sleep(time.Duration(rng.Int64N(int64(window))))
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("child %d exited by itself: %s", done, stderr.String())
		}
		if proxy != nil {
			require.True(t, proxy.Drain(30*time.Second), "the server finishes the dead child's requests")
		}
		r, err := Verify(ctx, s, path, readAcks(t, ackPath))
		require.NoError(t, err, "after kill %d", done)
		require.False(t, r.Refused, "after kill %d: a single writer's checkpoint always reconciles", done)
		if r.Interleaved+r.Duplicated > 0 {
			items, _ := s.Items(ctx)
			for i, it := range items {
				t.Logf("%d: %s", i, it)
			}
		}
		require.Zero(t, r.Duplicated, "after kill %d: %s", done, r)
		require.Zero(t, r.Interleaved, "after kill %d: %s", done, r)
		require.Zero(t, r.Orphans, "after kill %d: %s", done, r)
		require.Zero(t, r.Lost, "after kill %d: %s", done, r)
		total = r
		if done >= 2 && len(readAcks(t, ackPath)) == 0 {
			window = min(2*window, 2*time.Second)
		}
	}
	require.Positive(t, total.Batches, "the children wrote batches")
	acked := len(readAcks(t, ackPath))
	require.Positive(t, acked)
	t.Logf("crash loop %s: kills=%d (within %v of ready) batches=%d acknowledged=%d lost=%d duplicated=%d interleaved=%d orphans=%d",
		redactDSN(dsn), done, window, total.Batches, acked, total.Lost, total.Duplicated, total.Interleaved, total.Orphans)
}

// readAcks returns the batches the children reported acknowledged.
func readAcks(t *testing.T, path string) map[int]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	out := map[int]bool{}
	for _, line := range strings.Fields(string(b)) {
		k, err := strconv.Atoi(line)
		require.NoError(t, err)
		out[k] = true
	}
	return out
}

func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "?"
	}
	return u.Scheme
}

func TestCrashLoop(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		crashLoop(t, "sqlite://"+filepath.Join(t.TempDir(), "sessions.db"), false)
	})
	t.Run("redis-durable", func(t *testing.T) {
		crashLoop(t, testservers.NewRedisServer(t).URL(), true)
	})
	t.Run("redis-cluster", func(t *testing.T) {
		crashLoop(t, "redis+cluster://"+strings.Join(testservers.RedisCluster(t), ",")+"?key_prefix=crash"+strconv.FormatInt(time.Now().UnixNano(), 36), false)
	})
	t.Run("mongo", func(t *testing.T) {
		u, err := url.Parse(testservers.Mongo(t))
		require.NoError(t, err)
		u.Path = "/crash" + strconv.FormatInt(time.Now().UnixNano(), 36)
		crashLoop(t, u.String(), true)
	})
}
