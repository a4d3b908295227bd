package testservers

import (
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// ferretRestartWindow is how long Start keeps trying to start FerretDB
// again on its port, which a server just killed may still hold for a
// moment.
const ferretRestartWindow = 10 * time.Second

// ferretArgs are the launcher's arguments to run FerretDB (SQLite backend)
// listening on listen with its databases in dir.
func ferretArgs(listen, dir string) []string {
	return []string{"ferretdb", "-listen", listen, "-dir", dir}
}

// ferretPostgresArgs are the launcher's arguments to run FerretDB on its
// PostgreSQL backend, listening on listen, with its data in the database
// pgURL names, and its write commands serialised (see the launcher's
// -serialize-writes).
func ferretPostgresArgs(listen, pgURL string) []string {
	return []string{"ferretdb", "-listen", listen, "-postgresql-url", pgURL, "-serialize-writes"}
}

// FerretDB is a private FerretDB v1.24 (SQLite backend) run by the
// launcher, for tests that stop and restart their Mongo-wire server (fault
// tests). It keeps its port, so its URI, and its data directory across Stop
// and Start.
//
// FerretDB runs inside the launcher process (it is embedded as a Go
// package), so killing the launcher kills the server and closes its
// listener at once. The launcher passes FerretDB no SQLite pragma (only
// _txlock=immediate), so its databases get FerretDB's defaults
// (journal_mode WAL, busy_timeout 10 s) and SQLite's synchronous FULL:
// FerretDB answers a write once its
// transaction is committed to the WAL file, fsync included, so an
// acknowledged write survives the process being killed.
type FerretDB struct {
	tb  testing.TB
	dir string // working directory: launcher.log, and data/ for the databases
	private
	uri string // guarded by mu
}

// NewFerretDB starts a private FerretDB (SQLite backend) on a free loopback
// port with its own data directory, which the test may Stop or Kill and
// Start again. It is stopped automatically at test cleanup. When it cannot
// be started, the test is skipped, or fails when
// SESSIONS_REQUIRE_BACKENDS=1.
func NewFerretDB(tb testing.TB) *FerretDB {
	tb.Helper()
	s := &FerretDB{tb: tb, dir: tb.TempDir(), private: private{grace: ferretStopGrace}}
	err := s.startNewPort(func(port int) (*process, error) {
		p, uri, err := startPrivateFerretDB(s.dir, port)
		if err == nil {
			s.mu.Lock()
			s.uri = uri
			s.mu.Unlock()
		}
		return p, err
	})
	if err != nil {
		unavailable(tb, "a private FerretDB (SQLite) via the launcher", err)
	}
	tb.Cleanup(func() { s.stop(false) })
	return s
}

// URI returns the server's MongoDB URI as the launcher reports it,
// mongodb://127.0.0.1:PORT/; it stays the same across restarts.
func (s *FerretDB) URI() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uri
}

// Stop shuts the server down gracefully and waits for it to exit: the
// launcher's stdin is closed, so FerretDB closes its listener at once,
// keeps serving the connections it has for up to 3 seconds (its own
// shutdown delay), then closes them and its databases. It is killed if it
// has not exited after a grace period. Stopping a stopped server does
// nothing.
func (s *FerretDB) Stop() { s.stop(false) }

// Kill kills the launcher, and with it FerretDB, at once (SIGKILL), as a
// crash would, and waits for it to exit. Killing a stopped server does
// nothing.
func (s *FerretDB) Kill() { s.stop(true) }

// Start starts a stopped server again on the same port and data directory
// and waits until it answers (the launcher's READY line, printed once a
// MongoDB driver could ping it). While the port is still held, it retries
// for a few seconds. Starting a running server does nothing. On failure it
// calls tb.Fatalf, so call it from the test's goroutine.
func (s *FerretDB) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		return
	}
	deadline := time.Now().Add(ferretRestartWindow)
	for tries := 1; ; tries++ {
		p, uri, err := startPrivateFerretDB(s.dir, s.port)
		if err == nil && uri != s.uri {
			p.stop(ferretStopGrace)
			err = fmt.Errorf("it reports the URI %s, not %s as before", uri, s.uri)
		}
		if err == nil {
			s.proc = p
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("testservers: restart FerretDB on port %d (%d tries), last: %v", s.port, tries, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startPrivateFerretDB runs "launcher ferretdb" on 127.0.0.1:port in dir,
// with its databases in dir/data, and returns it once it is READY.
func startPrivateFerretDB(dir string, port int) (*process, string, error) {
	return startLauncher(fmt.Sprintf("launcher ferretdb on port %d", port), dir, ferretReadyTimeout, syscall.SIGKILL,
		ferretArgs("127.0.0.1:"+strconv.Itoa(port), filepath.Join(dir, "data"))...)
}
