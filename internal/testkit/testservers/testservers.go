// Package testservers starts real backend servers for the tests of this
// module: a standalone Redis, a 3-master Redis Cluster, private Redis servers
// for fault tests, a Mongo-wire server and PostgreSQL. No mocks.
//
// Each server is chosen in this order: an address from the environment, else
// a testcontainers-go container when a Docker engine answers (standalone
// Redis, Mongo and PostgreSQL only), else a local server on a free loopback
// port (redis-server; FerretDB with its PostgreSQL backend for Mongo; a
// throwaway initdb cluster for PostgreSQL, run as the user "postgres" when
// the tests run as root). Shared servers are started
// lazily, once per test process, and stopped by [Main]:
//
//	func TestMain(m *testing.M) { testservers.Main(m) }
//
// When a server cannot be started the test is skipped with a message saying
// what was tried and why it failed, or fails instead when the environment
// sets SESSIONS_REQUIRE_BACKENDS=1.
//
// FerretDB and testcontainers-go are heavy, so they live in the nested module
// ./launcher, which this package builds on demand with the go command; this
// package itself uses the standard library only.
package testservers

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// Environment variables read by this package.
const (
	// EnvRedisURL names a standalone Redis to use instead of starting one,
	// e.g. redis://127.0.0.1:6379/0.
	EnvRedisURL = "SESSIONS_REDIS_URL"
	// EnvRedisClusterAddrs names the nodes of a Redis Cluster to use instead
	// of starting one, comma-separated host:port pairs.
	EnvRedisClusterAddrs = "SESSIONS_REDIS_CLUSTER_ADDRS"
	// EnvMongoURI names a MongoDB (or Mongo-wire) server to use instead of
	// starting one.
	EnvMongoURI = "SESSIONS_MONGO_URI"
	// EnvRequireBackends, when "1", turns a server that cannot be started
	// into a test failure instead of a skip.
	EnvRequireBackends = "SESSIONS_REQUIRE_BACKENDS"
	// EnvSkipLog, when set, names a file to which every skip for a server
	// that could not be started appends a line; make test prints them.
	EnvSkipLog = "SESSIONS_SKIP_LOG"
	// EnvDocker, when "0", disables the testcontainers path even when a
	// Docker engine answers, so local servers are used.
	EnvDocker = "SESSIONS_TESTSERVERS_DOCKER"
)

// Kinds of server reported by [RedisKind], [RedisClusterKind] and [MongoKind].
const (
	KindEnv              = "env"
	KindContainer        = "container"
	KindLocalRedisServer = "local-redis-server"
	KindFerretDBSQLite   = "ferretdb-sqlite"
	KindFerretDBPostgres = "ferretdb-postgresql"
)

// Main runs the tests of a package and then stops every server this process
// started and removes their temporary directories. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testservers.Main(m) }
//
// A SIGINT or SIGTERM during the run also stops the servers before the
// process exits. Local servers die with the test process even without Main
// (they are started with a parent-death signal on Linux), but their temporary
// directories and any container would be left behind.
func Main(m *testing.M) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s, ok := <-sig
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "testservers: got %v, stopping servers\n", s)
		stopAll()
		os.Exit(1)
	}()
	code := m.Run()
	signal.Stop(sig)
	close(sig)
	stopAll()
	if code == 0 {
		// Every test has ended and every store it opened must be closed by
		// now: a goroutine still running is a leak (a pool, a reaper, a
		// writer a Close forgot).
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "testservers: goroutines leaked by the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// registry holds what the process must undo at exit: stop functions, run
// concurrently, and the shared temporary directory.
var registry struct {
	mu      sync.Mutex
	stops   []func()
	stopped bool
	tmpDir  string
}

// onStop registers f to run when the process's servers are stopped. It
// returns false (and does not register f) when stopAll has already run; the
// caller must then undo its work itself.
func onStop(f func()) bool {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.stopped {
		return false
	}
	registry.stops = append(registry.stops, f)
	return true
}

// stopAll stops every registered server and removes the
// process's temporary directory. It is safe to call more than once.
func stopAll() {
	registry.mu.Lock()
	stops := registry.stops
	registry.stops = nil
	registry.stopped = true
	dir := registry.tmpDir
	registry.mu.Unlock()
	// Servers do not depend on each other: stop them all at once.
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// processDir returns a temporary directory owned by this test process,
// creating it on first use; stopAll removes it.
func processDir() (string, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.stopped {
		return "", fmt.Errorf("testservers: servers already stopped")
	}
	if registry.tmpDir == "" {
		removeStaleDirs()
		dir, err := os.MkdirTemp("", processDirPrefix)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		registry.tmpDir = dir
	}
	return registry.tmpDir, nil
}

// processDirPrefix starts the name of every process's temporary directory.
const processDirPrefix = "agentsessions-testservers-"

// removeStaleDirs removes the temporary directories of test processes that
// died without running Main's cleanup (a crash, a test timeout, SIGKILL).
// Their servers died with them; each directory names its owner in "pid".
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), processDirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			continue // being created, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// subDir creates a fresh directory named after prefix under processDir.
func subDir(prefix string) (string, error) {
	root, err := processDir()
	if err != nil {
		return "", err
	}
	return os.MkdirTemp(root, prefix+"-")
}

// lazy starts a shared server once and remembers the result, including a
// failure, which is then reported to every caller.
type lazy[T any] struct {
	once sync.Once
	val  T
	kind string
	err  error
	mu   sync.Mutex // guards kind for concurrent Kind calls
}

// get starts the server with start on first use.
func (l *lazy[T]) get(start func() (T, string, error)) (T, error) {
	l.once.Do(func() {
		v, kind, err := start()
		l.mu.Lock()
		l.val, l.kind, l.err = v, kind, err
		l.mu.Unlock()
	})
	return l.val, l.err
}

// Kind returns the kind of server started, or "" before the first start
// and after a failed one.
func (l *lazy[T]) Kind() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return ""
	}
	return l.kind
}

// unavailable reports that a server could not be started: tb.Fatalf when
// SESSIONS_REQUIRE_BACKENDS=1, tb.Skipf otherwise.
func unavailable(tb testing.TB, what string, err error) {
	tb.Helper()
	if os.Getenv(EnvRequireBackends) == "1" {
		tb.Fatalf("testservers: %s is required (%s=1) but could not be started: %v", what, EnvRequireBackends, err)
	}
	if path := os.Getenv(EnvSkipLog); path != "" {
		if f, ferr := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); ferr == nil {
			fmt.Fprintf(f, "%s\t%s\n", what, tb.Name())
			f.Close()
		}
	}
	tb.Skipf("testservers: skipping, %s could not be started (set %s=1 to fail instead): %v", what, EnvRequireBackends, err)
}

// attempts collects the reasons each way of getting a server failed.
type attempts []string

func (a *attempts) add(way string, err error) { *a = append(*a, way+": "+err.Error()) }

func (a attempts) Error() string { return "tried " + strings.Join(a, "; then ") }

// note tells the person running the tests about a fallback they may not
// expect, such as a container that failed although Docker answers.
func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testservers: "+format+"\n", args...)
}
