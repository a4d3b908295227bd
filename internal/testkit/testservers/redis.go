package testservers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Time allowed for a local redis-server to answer PING, and for it to exit
// after SIGTERM before it is killed.
const (
	redisReadyTimeout = 15 * time.Second
	redisStopGrace    = 10 * time.Second
)

var sharedRedis lazy[string]

// Redis returns the URL (redis://127.0.0.1:PORT/0) of a standalone Redis
// shared by the test process: SESSIONS_REDIS_URL when set; else a
// testcontainers-go redis:7 container when a Docker engine answers; else a
// redis-server started on a free loopback port in a temporary directory.
// Tests sharing it should use their own keys (or their own database number).
// When no server can be had, the test is skipped, or fails when
// SESSIONS_REQUIRE_BACKENDS=1.
func Redis(tb testing.TB) string {
	tb.Helper()
	url, err := sharedRedis.get(startSharedRedis)
	if err != nil {
		unavailable(tb, "standalone Redis", err)
	}
	return url
}

// RedisKind reports which kind of server [Redis] returned: "env",
// "container" or "local-redis-server"; "" before Redis was first called or
// when it failed.
func RedisKind() string { return sharedRedis.Kind() }

func startSharedRedis() (string, string, error) {
	if url := os.Getenv(EnvRedisURL); url != "" {
		return url, KindEnv, nil
	}
	var tried attempts
	if err := dockerEngine(); err != nil {
		tried.add("testcontainers", err)
	} else {
		url, err := startContainer("redis")
		if err == nil {
			return url, KindContainer, nil
		}
		tried.add("testcontainers redis:7", err)
		note("a Docker engine answers but testcontainers redis:7 failed, falling back to a local server: %v", err)
	}
	srv, err := startSharedLocalRedis()
	if err != nil {
		tried.add("local redis-server", err)
		return "", "", tried
	}
	return srv.URL(), KindLocalRedisServer, nil
}

// startSharedLocalRedis starts a redis-server without persistence that
// stopAll stops.
func startSharedLocalRedis() (*RedisServer, error) {
	dir, err := subDir("redis")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{dir: dir, extraArgs: []string{"--save", "", "--appendonly", "no"}, private: private{grace: redisStopGrace}}
	if err := s.startNewPort(); err != nil {
		return nil, err
	}
	if !onStop(func() { s.stop(false) }) {
		s.stop(false)
		return nil, errors.New("servers already stopped")
	}
	return s, nil
}

// RedisServer is a private local redis-server, for tests that stop and
// restart their server (fault tests). It keeps its port and its data
// directory across Stop and Start, and persists every write (append-only
// file, fsync always), so data written before a Stop or a Kill is there
// after Start.
type RedisServer struct {
	tb        testing.TB
	dir       string
	extraArgs []string
	private
}

// NewRedisServer starts a private local redis-server that the test may Stop
// and Start again on the same port and data directory. It is stopped
// automatically at test cleanup. When redis-server cannot be started, the
// test is skipped, or fails when SESSIONS_REQUIRE_BACKENDS=1.
func NewRedisServer(tb testing.TB) *RedisServer {
	tb.Helper()
	s := &RedisServer{
		tb:        tb,
		dir:       tb.TempDir(),
		extraArgs: []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"},
		private:   private{grace: redisStopGrace},
	}
	if err := s.startNewPort(); err != nil {
		unavailable(tb, "a private local redis-server", err)
	}
	tb.Cleanup(func() { s.stop(false) })
	return s
}

// Addr returns the server's address, 127.0.0.1:PORT.
func (s *RedisServer) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// URL returns the server's URL, redis://127.0.0.1:PORT/0.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop shuts the server down gracefully (SIGTERM) and waits for it to
// exit. Stopping a stopped server does nothing.
func (s *RedisServer) Stop() { s.stop(false) }

// Kill kills the server at once (SIGKILL), as a crash would, and waits for
// it to exit. Killing a stopped server does nothing.
func (s *RedisServer) Kill() { s.stop(true) }

// Start starts a stopped server again on the same port and data directory
// and waits until it answers PING. Starting a running server does nothing.
// On failure it calls tb.Fatalf, so call it from the test's goroutine.
func (s *RedisServer) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		return
	}
	p, err := startLocalRedis(s.dir, s.port, s.extraArgs...)
	if err != nil {
		s.tb.Fatalf("testservers: restart redis-server on port %d: %v", s.port, err)
	}
	s.proc = p
}

// startNewPort starts the server on a free port, choosing another one when
// the port was taken before redis-server could bind it.
func (s *RedisServer) startNewPort() error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errNoRedisServer
	}
	return s.private.startNewPort(func(port int) (*process, error) {
		return startLocalRedis(s.dir, port, s.extraArgs...)
	})
}

// errNoRedisServer means the redis-server binary is not installed.
var errNoRedisServer = errors.New("redis-server not found in PATH (install the Debian package redis-server)")

// startLocalRedis starts redis-server on 127.0.0.1:port with its files in
// dir, plus extraArgs, and waits until it answers PING. The process is
// checked to be the one answering (INFO server's process_id), so a port
// taken by another server is reported rather than used.
func startLocalRedis(dir string, port int, extraArgs ...string) (*process, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedisServer
	}
	args := append([]string{
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--dir", dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "",
	}, extraArgs...)
	name := fmt.Sprintf("redis-server on port %d", port)
	p, err := startProcess(name, dir, filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)), bin, args...)
	if err != nil {
		return nil, err
	}
	if err := waitRedis(p, "127.0.0.1:"+strconv.Itoa(port), redisReadyTimeout); err != nil {
		p.kill()
		return nil, p.failure(err)
	}
	return p, nil
}

// waitRedis polls addr until it answers PING with PONG and INFO shows p's
// process id, or p exits, or timeout passes.
func waitRedis(p *process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if done, _ := p.exited(); done {
			return fmt.Errorf("exited before answering PING on %s (last error: %v)", addr, last)
		}
		last = pingRedis(addr)
		if last == nil {
			info, err := redisCommand(addr, time.Second, "INFO", "server")
			if err != nil {
				last = err
			} else if pid := infoFields(info)["process_id"]; pid != strconv.Itoa(p.pid()) {
				// Another server holds the port; ours will fail to bind.
				last = fmt.Errorf("%s is answered by process %s, not by ours (%d)", addr, pid, p.pid())
			} else {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no PONG from %s within %v: %v", addr, timeout, last)
}

// pingRedis sends PING to addr and expects PONG.
func pingRedis(addr string) error {
	s, err := redisCommand(addr, time.Second, "PING")
	if err != nil {
		return err
	}
	if !strings.EqualFold(s, "PONG") {
		return fmt.Errorf("PING answered %q", s)
	}
	return nil
}
