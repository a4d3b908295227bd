package testservers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvPostgresURL names a PostgreSQL server to use instead of starting one,
// e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
const EnvPostgresURL = "SESSIONS_POSTGRES_URL"

// KindLocalPostgres is the kind of server [Postgres] returns when it
// started a throwaway local cluster.
const KindLocalPostgres = "local-postgres"

// Time allowed for initdb, for a local postgres to accept connections, and
// for it to exit after a fast shutdown before it is killed.
const (
	postgresInitTimeout  = 2 * time.Minute
	postgresReadyTimeout = 60 * time.Second
	postgresStopGrace    = 15 * time.Second
)

// postgresUser is the operating-system user the local cluster runs as when
// the tests run as root (PostgreSQL refuses root), and the cluster's
// superuser name in every case. Debian's postgresql package creates it.
const postgresUser = "postgres"

var sharedPostgres lazy[string]

// Postgres returns the URL of a PostgreSQL server shared by the test
// process: SESSIONS_POSTGRES_URL when set; else a testcontainers-go
// postgres:17 container when a Docker engine answers; else a throwaway
// cluster made by initdb in a temporary directory and served by the postgres
// binary of Debian's postgresql package on a free loopback port (as the
// unprivileged user "postgres" when the tests run as root). Tests sharing it
// should use their own tables or schemas. When no server can be had, the
// test is skipped, or fails when SESSIONS_REQUIRE_BACKENDS=1.
func Postgres(tb testing.TB) string {
	tb.Helper()
	url, err := sharedPostgres.get(startSharedPostgres)
	if err != nil {
		unavailable(tb, "PostgreSQL", err)
	}
	return url
}

// PostgresKind reports which kind of server [Postgres] returned: "env",
// "container" or "local-postgres"; "" before Postgres was first called or
// when it failed.
func PostgresKind() string { return sharedPostgres.Kind() }

func startSharedPostgres() (string, string, error) {
	if url := os.Getenv(EnvPostgresURL); url != "" {
		return url, KindEnv, nil
	}
	var tried attempts
	if err := dockerEngine(); err != nil {
		tried.add("testcontainers", err)
	} else {
		url, err := startContainer("postgres")
		if err == nil {
			return url, KindContainer, nil
		}
		tried.add("testcontainers postgres:17", err)
		note("a Docker engine answers but testcontainers postgres:17 failed, falling back to a local cluster: %v", err)
	}
	url, err := startLocalPostgres()
	if err != nil {
		tried.add("local initdb + postgres", err)
		return "", "", tried
	}
	return url, KindLocalPostgres, nil
}

// postgresBinDir finds the directory holding initdb, pg_ctl and postgres:
// the one of initdb on PATH, else the newest /usr/lib/postgresql/<ver>/bin
// (Debian keeps them off PATH).
func postgresBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errNoPostgres
}

// pgVersion returns the major version in /usr/lib/postgresql/<ver>/bin.
func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// errNoPostgres means PostgreSQL's server binaries are not installed.
var errNoPostgres = errors.New("initdb and postgres not found on PATH nor in /usr/lib/postgresql/*/bin (install the Debian package postgresql)")

// startLocalPostgres makes a throwaway cluster and serves it on a free
// loopback port; stopAll stops it and removes its directory.
//
// The directory is a sibling of the process directory, not inside it:
// that one is private to root (0700), and the server may run as another
// user. It carries the same prefix and pid file, so that the stale-directory
// sweep removes it when its test process died.
func startLocalPostgres() (string, error) {
	bin, err := postgresBinDir()
	if err != nil {
		return "", err
	}
	owner, err := postgresOwner()
	if err != nil {
		return "", err
	}
	if _, err := processDir(); err != nil { // sweeps stale directories first
		return "", err
	}
	dir, err := os.MkdirTemp("", processDirPrefix+"postgres-")
	if err != nil {
		return "", err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		cleanup()
		return "", err
	}
	if err := owner.chown(dir); err != nil {
		cleanup()
		return "", fmt.Errorf("give %s to user %s: %w", dir, postgresUser, err)
	}
	data := filepath.Join(dir, "data")
	if err := initdb(bin, dir, data, owner); err != nil {
		cleanup()
		return "", err
	}
	var tried attempts
	for range startRetries {
		port, err := freePort()
		if err != nil {
			cleanup()
			return "", err
		}
		p, err := startPostgres(bin, dir, data, port, owner)
		if err != nil {
			tried.add("port "+strconv.Itoa(port), err)
			continue
		}
		if !onStop(func() { p.stop(postgresStopGrace); cleanup() }) {
			p.stop(postgresStopGrace)
			cleanup()
			return "", errors.New("servers already stopped")
		}
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", postgresUser, port), nil
	}
	cleanup()
	return "", tried
}

// initdb makes a cluster in data: superuser "postgres", trust
// authentication (it listens on loopback only, for this test process),
// UTF-8, C collation.
func initdb(bin, dir, data string, owner pgOwner) error {
	cmd := exec.Command(filepath.Join(bin, "initdb"),
		"-D", data, "-U", postgresUser, "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = owner.sysProcAttr()
	setDeathSignal(cmd.SysProcAttr, syscall.SIGKILL)
	done := make(chan struct{})
	timer := time.AfterFunc(postgresInitTimeout, func() {
		select {
		case <-done:
		default:
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
		}
	})
	out, err := cmd.CombinedOutput()
	close(done)
	timer.Stop()
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, tail(string(out), 1500))
	}
	return nil
}

// startPostgres runs the postgres server itself in the foreground (pg_ctl
// start would detach it from this process, and with it the parent-death
// signal), on 127.0.0.1:port with its socket in dir, and waits until it
// accepts connections. The parent-death signal is SIGQUIT, PostgreSQL's
// immediate shutdown, which also ends its worker processes; Stop asks for
// a fast shutdown (SIGINT). The throwaway cluster runs with fsync off: it
// is deleted at the end anyway.
func startPostgres(bin, dir, data string, port int, owner pgOwner) (*process, error) {
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(port),
		"-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB", // many test processes may each run one
		"-c", "logging_collector=off",
	)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = owner.sysProcAttr()
	name := fmt.Sprintf("postgres on port %d", port)
	p, err := startCmd(name, filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port)), cmd, syscall.SIGQUIT)
	if err != nil {
		return nil, err
	}
	p.askStop = func() { _ = p.cmd.Process.Signal(syscall.SIGINT) }
	if err := waitPostgres(p, data, port, postgresReadyTimeout); err != nil {
		p.kill()
		return nil, p.failure(err)
	}
	return p, nil
}

// waitPostgres waits until the server p says, in its postmaster.pid, that it
// is ready and listens on port, and the port accepts a connection; or p
// exits, or timeout passes. The pid file names the process, so a port held
// by another server is never mistaken for ours (ours fails to bind and
// exits).
func waitPostgres(p *process, data string, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	last := errors.New("postmaster.pid not written yet")
	for time.Now().Before(deadline) {
		if done, _ := p.exited(); done {
			return fmt.Errorf("exited before accepting connections on %s (last: %v)", addr, last)
		}
		if last = postmasterReady(data, p.pid(), port); last == nil {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				return nil
			}
			last = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready on %s within %v: %v", addr, timeout, last)
}

// postmasterReady reads data/postmaster.pid: line 1 is the pid, line 4 the
// port, line 8 the status ("ready" once connections are accepted).
func postmasterReady(data string, pid, port int) error {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 {
		return fmt.Errorf("postmaster.pid has %d lines", len(lines))
	}
	if strings.TrimSpace(lines[0]) != strconv.Itoa(pid) {
		return fmt.Errorf("postmaster.pid names process %s, not ours (%d)", lines[0], pid)
	}
	if strings.TrimSpace(lines[3]) != strconv.Itoa(port) {
		return fmt.Errorf("postmaster.pid names port %s, not %d", lines[3], port)
	}
	if st := strings.TrimSpace(lines[7]); st != "ready" {
		return fmt.Errorf("postmaster status %q", st)
	}
	return nil
}
