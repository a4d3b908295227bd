package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func init() {
	commands["check"] = command{"run the conformance suite against a store (default: embedded SQLite)", runCheck}
}

func runCheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "check", "[URL]")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	only := fs.String("run", "", "run only clauses matching this regular expression (the grade then counts the others as not run)")
	nativeOnly := fs.Bool("native-only", false, "skip the contract's second pass with capabilities hidden")
	timeout := fs.Duration("timeout", 2*time.Minute, "time limit for each clause (slow servers need more)")
	minTTL := fs.Duration("min-ttl", time.Second, "the shortest TTL the TTL clauses set, and the margin they leave a write and a read (a store keeping whole seconds needs 1s)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("at most one store URL, got %d", len(pos))
	}
	if *timeout <= 0 {
		return usagef("-timeout must be positive")
	}
	if *minTTL < time.Millisecond {
		return usagef("-min-ttl must be at least 1ms")
	}
	opts := conformance.Options{Timeout: *timeout, NativeOnly: *nativeOnly, RunID: checkRunID()}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return usagef("-run: %v", err)
		}
		opts.Run = re
	}
	dsn := ""
	if len(pos) == 1 {
		dsn = pos[0]
		if err := requireExisting(ctx, dsn); err != nil {
			return explainOpen(ctx, ctx, dsn, time.Minute, readWrite, err)
		}
	} else {
		dir, err := os.MkdirTemp("", "sessionctl-check-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dsn = "sqlite://" + filepath.Join(dir, "sessions.db")
		if !*asJSON {
			fmt.Fprintf(e.stdout, "no store URL given: checking the embedded SQLite default at %s\n\n", dsn)
		}
	}
	// An SQLite file, a PostgreSQL database and a MongoDB database keep
	// the schema they had: what the check's stores create (the
	// checkpoints and operation-id tables a Python-written file lacks,
	// the tables, collections and indexes a database lacks) is dropped
	// again once they are closed.
	var schema schemaKeeper
	if len(pos) == 1 {
		if schema, err = snapshotSchema(ctx, dsn); err != nil {
			return err
		}
	}
	h, err := openHarness(ctx, dsn, *minTTL)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			h.Close()
		}
	}()
	if !*asJSON {
		fmt.Fprintf(e.stdout, "probe sessions: %s%s:… (each cleared when its clause ends)\n\n", conformance.ProbePrefix, opts.RunID)
	}

	rep := conformance.Check(ctx, h, opts)
	h.Close()
	closed = true
	schemaNote, schemaErr := "", error(nil)
	if schema != nil {
		if checkHookBeforeRestore != nil {
			checkHookBeforeRestore()
		}
		dropped, left, err := schema.restore(ctx)
		switch {
		case err != nil:
			schemaErr = fmt.Errorf("the check could not drop what it added to the schema of %s: %w", redactDSN(dsn), err)
		case len(left) > 0:
			schemaErr = fmt.Errorf("the schema of %s is not as it was: left %s", redactDSN(dsn), strings.Join(left, "; "))
		case len(dropped) > 0:
			schemaNote = "schema: as it was (dropped what the check created: " + strings.Join(dropped, ", ") + ")"
		default:
			schemaNote = "schema: as it was (the check created nothing)"
		}
	}
	if *asJSON {
		js, err := rep.JSON()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(e.stdout, "%s\n", js); err != nil {
			return err
		}
	} else if err := rep.WriteText(e.stdout); err != nil {
		return err
	}
	if schemaNote != "" && !*asJSON {
		fmt.Fprintln(e.stdout, schemaNote)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if schemaErr != nil {
		return schemaErr
	}
	if !rep.OK() {
		return errFailed
	}
	return nil
}

// checkHookBeforeRestore, when set (by tests), runs once the suite is
// done and its stores are closed, before the schema is restored: a write
// from something else during the check.
var checkHookBeforeRestore func()

// checkRunID names one check in the probe namespace: the time it started
// (so an operator can tell runs apart) and a random tail.
func checkRunID() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return time.Now().UTC().Format("20060102T150405Z")
	}
	return fmt.Sprintf("%s-%x", time.Now().UTC().Format("20060102T150405Z"), b)
}

// dsnHarness serves the conformance suite from a store URL: Open uses one
// opened store, OpenPeer a second, independent one on the same URL. Its
// raw-write and TTL hooks answer session.ErrUnsupported when the backend
// has no way to do them, and the clauses that need them are skipped (which
// keeps the grade below FULL).
type dsnHarness struct {
	dsn, name  string
	main, peer adapters.Store
	corrupt    *driver.CorruptLog
	minTTL     time.Duration

	mu  sync.Mutex
	ttl map[time.Duration]adapters.Store
}

// openHarness opens dsn twice (once for memory://, whose store lives in
// this process).
func openHarness(ctx context.Context, dsn string, minTTL time.Duration) (*dsnHarness, error) {
	corrupt := &driver.CorruptLog{}
	opts := adapters.Options{OnCorrupt: corrupt.Handler()}
	main, err := adapters.OpenWith(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	peer := main
	if !isMemory(dsn) {
		if peer, err = adapters.OpenWith(ctx, dsn, opts); err != nil {
			main.Close()
			return nil, err
		}
	}
	return &dsnHarness{dsn: dsn, name: redactDSN(dsn), main: main, peer: peer, corrupt: corrupt, minTTL: minTTL,
		ttl: map[time.Duration]adapters.Store{}}, nil
}

func (h *dsnHarness) Name() string { return h.name }
func (h *dsnHarness) Open(_ context.Context, id string) (session.Session, error) {
	return h.main.Session(id)
}
func (h *dsnHarness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.peer.Session(id)
}
func (h *dsnHarness) Declared() session.Capabilities { return h.main.Declared() }

// OpenClosed opens the URL once more, takes a handle on id and closes that
// store (conformance.Closer): a check shows use after close too.
func (h *dsnHarness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := adapters.Open(ctx, h.dsn)
	if err != nil {
		return nil, err
	}
	s, err := st.Session(id)
	if err != nil {
		st.Close()
		return nil, err
	}
	return s, st.Close()
}

// AppendRaw writes a record the adapter would refuse, when the backend
// allows it (driver.RawAppender).
func (h *dsnHarness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	r, ok := h.main.(driver.RawAppender)
	if !ok {
		return fmt.Errorf("%w: raw writes", session.ErrUnsupported)
	}
	return r.AppendRaw(ctx, id, raw)
}

// CorruptReports returns the reports the store made about session id.
func (h *dsnHarness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

// sessionRemover is implemented by stores that keep a trace of a cleared
// session and can delete it (conformance.Remover).
type sessionRemover interface {
	RemoveSession(ctx context.Context, id string) error
}

// RemoveSession deletes what Clear leaves of a probe session, when the
// store can.
func (h *dsnHarness) RemoveSession(ctx context.Context, id string) error {
	if r, ok := h.main.(sessionRemover); ok {
		return r.RemoveSession(ctx, id)
	}
	return nil
}

// OpenTTL reopens the URL with ttl=<ttl> (memory, redis and mongo take it).
func (h *dsnHarness) OpenTTL(ctx context.Context, id string, ttl time.Duration) (session.Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.ttl[ttl]
	if st == nil {
		u, err := url.Parse(h.dsn)
		if err != nil {
			// The parse error would quote the URL, password and all.
			return nil, fmt.Errorf("%w: the store URL does not parse", session.ErrUnsupported)
		}
		q := u.Query()
		q.Set("ttl", ttl.String())
		u.RawQuery = q.Encode()
		if st, err = adapters.OpenWith(ctx, u.String(), adapters.Options{OnCorrupt: h.corrupt.Handler()}); err != nil {
			return nil, fmt.Errorf("%w: %v", session.ErrUnsupported, err)
		}
		h.ttl[ttl] = st
	}
	return st.Session(id)
}

// Advance waits: a real store keeps real time.
func (h *dsnHarness) Advance(d time.Duration) { time.Sleep(d) }

// MinTTL is -min-ttl.
func (h *dsnHarness) MinTTL() time.Duration { return h.minTTL }

func (h *dsnHarness) Close() {
	_ = h.main.Close()
	if h.peer != h.main {
		_ = h.peer.Close()
	}
	for _, st := range h.ttl {
		_ = st.Close()
	}
}
