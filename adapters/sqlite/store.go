package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	_ "modernc.org/sqlite" // the pure-Go driver, registered as "sqlite"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Store is one SQLite database holding many sessions. It is safe for
// concurrent use, and several Stores (in one process or in several) may
// share a database file.
type Store struct {
	advanced bool // an AdvancedSQLiteSession store when opened (advanced.go)
	// schemaSeen is the schema cookie (PRAGMA schema_version) a write
	// transaction last read, -1 before the first; advancedSeen says
	// whether the database was then an AdvancedSQLiteSession store
	// (advancedNow).
	schemaSeen   atomic.Int64
	advancedSeen atomic.Bool
	db           *sql.DB
	owned        bool // Open opened db, so Close closes it
	memory       bool // an in-memory database: its one connection is the database
	opts         Options
	q            *queries
	aq           advQueries // the AdvancedSQLiteSession statements (advanced.go)
	// w is the group-commit writer every write goes through (writer.go).
	w writerState
	// syncPragma, for OpenDB with Options.Synchronous, is run on each
	// write connection.
	syncPragma string
	// rs holds the read statements, prepared once on the *sql.DB (which
	// prepares each on a connection the first time it runs there).
	rs readStmts
	// pageStmts are SummarizeSessions' statements for a full page of ids,
	// prepared on first use (list.go).
	pageStmts pageStmts
	closed    atomic.Bool // calls fail with ErrClosed
	// ckReady: the checkpoints table is known to exist (checkpoints.go).
	ckReady atomic.Bool
	// opsReady: the operation-id table is known to exist (once.go).
	opsReady atomic.Bool
	closing  atomic.Bool // Close was called
	// ownIndexes: this package's indexes on an AdvancedSQLiteSession
	// store were added (ensureOwnIndexes).
	ownIndexes atomic.Bool
}

// readStmts are the prepared statements of the reads.
type readStmts struct {
	items, itemsData, latestData, since *sql.Stmt
}

// Open opens (creating if needed) the SQLite database at path with the
// pure-Go driver modernc.org/sqlite and returns a Store that owns it: Close
// closes the database.
//
// path is a file path, ":memory:" for a private in-memory database that
// lives as long as the Store, or a "file:" URI such as
// "file:/data/agent.db?mode=rwc". Every connection gets the busy timeout,
// foreign keys and WAL journal mode (see DSN). Unless
// opts.SkipCreateTables is set, the tables and index are created if
// missing.
func OpenFile(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkPath(path, o.ReadOnly); err != nil {
		return nil, err
	}
	if o.ReadOnly && !strings.HasPrefix(path, "file:") && unopened(path) {
		return openImmutable(ctx, path, o)
	}
	dsn, err := DSN(path, o)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	memory := inMemory(path)
	if memory {
		// Each connection to ":memory:" is its own database: keep exactly
		// one, for the Store's lifetime.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
	} else {
		db.SetMaxIdleConns(max(4, runtime.GOMAXPROCS(0)))
	}
	st, err := newStore(ctx, db, true, memory, o, "")
	if err != nil {
		_ = db.Close()
		if o.ReadOnly && readOnlyDirectory(err) && !strings.HasPrefix(path, "file:") && noWAL(path) {
			return openImmutable(ctx, path, o)
		}
		return nil, &openError{path: path, err: err}
	}
	return st, nil
}

// openError names the file a failed OpenFile was given.
type openError struct {
	path string
	err  error
}

func (e *openError) Error() string {
	return fmt.Sprintf("sqlite: open %q: %s", e.path, strings.TrimPrefix(e.err.Error(), "sqlite: "))
}

func (e *openError) Unwrap() error { return e.err }

// checkPath says what is wrong with a file path before SQLite can only say
// "unable to open database file": a URL given as a path, a directory, a
// missing directory, or (read-only) a missing file. SQLite's own forms
// (":memory:", "file:" URIs) are SQLite's to check.
func checkPath(path string, readOnly bool) error {
	if readOnly {
		if err := checkReadOnlyPath(path); err != nil {
			return err
		}
	}
	if inMemory(path) || strings.HasPrefix(path, "file:") {
		return nil
	}
	if strings.HasPrefix(path, Scheme+":") {
		return fmt.Errorf("%w: open %q: that is a URL, not a file path: give it to adapters.Open, or give OpenFile the path", ErrInvalidOptions, path)
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("sqlite: open %q: is a directory, not a database file", path)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlite: open %q: %w", path, causeOf(err))
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("sqlite: open %q: directory %q: %w", path, dir, causeOf(err))
	} else if !fi.IsDir() {
		return fmt.Errorf("sqlite: open %q: %q is not a directory", path, dir)
	}
	return nil
}

// causeOf returns the cause inside a *fs.PathError, whose text would name
// the path a second time.
func causeOf(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readOnlyDirectory reports SQLITE_READONLY_DIRECTORY: SQLite cannot read
// a WAL-mode database read-only when it may not create the -shm file
// beside it.
func readOnlyDirectory(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code() == 1544 // SQLITE_READONLY | 6<<8
}

// unopened reports whether no connection has the database open: neither
// its -wal nor its -shm file exists. A read-only open then needs none of
// them, and creating them would leave files behind that SQLite, read-only,
// cannot remove.
func unopened(path string) bool {
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(path + suffix); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// noWAL reports whether no connection has the database open in WAL mode:
// there is no -wal file, or it is empty.
func noWAL(path string) bool {
	fi, err := os.Stat(path + "-wal")
	return errors.Is(err, fs.ErrNotExist) || err == nil && fi.Size() == 0
}

// openImmutable opens, with SQLite's immutable=1, a read-only database
// that no connection has open (unopened), or one in a directory this
// process cannot write (noWAL): SQLite then creates no file beside it, and
// it is the only way SQLite reads a WAL-mode file in such a directory.
// SQLite takes no lock, so a writer that opens the file later is not seen
// by this Store: reopen it to read what was written since.
func openImmutable(ctx context.Context, path string, o Options) (*Store, error) {
	dsn, err := DSN(fileURI(path)+"?immutable=1", o)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	db.SetMaxIdleConns(max(4, runtime.GOMAXPROCS(0)))
	st, err := newStore(ctx, db, true, false, o, "")
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return st, nil
}

// OpenDB returns a Store on a database the caller opened. db stays the
// caller's: Close does not close it.
//
// OpenDB leaves the connections' settings to the caller; DSN gives the
// recommended ones. Writes need neither a busy timeout nor foreign keys to
// be correct: they begin with BEGIN IMMEDIATE, retry a busy database with
// backoff for up to opts.BusyTimeout, and delete a session's rows
// explicitly. A private in-memory database needs db.SetMaxOpenConns(1).
func OpenDB(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidOptions)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	syncPragma := ""
	if opts.Synchronous != "" && !o.ReadOnly {
		syncPragma = o.Synchronous.pragma()
	}
	return newStore(ctx, db, false, false, o, syncPragma)
}

func newStore(ctx context.Context, db *sql.DB, owned, memory bool, o Options, syncPragma string) (*Store, error) {
	st := &Store{db: db, owned: owned, memory: memory, opts: o, q: newQueries(o), aq: newAdvQueries(o), syncPragma: syncPragma}
	st.schemaSeen.Store(-1)
	if !o.ReadOnly {
		// The writer keeps a connection of its own unless that would
		// leave reads none: a private in-memory database has exactly one,
		// and a caller's *sql.DB may allow only one.
		maxOpen := db.Stats().MaxOpenConnections
		st.startWriter(!memory && (maxOpen == 0 || maxOpen > 1))
	}
	if err := st.ensureSchema(ctx, o.SkipCreateTables || o.ReadOnly); err != nil {
		st.stopWriter()
		return nil, err
	}
	advanced, err := st.detectAdvanced(ctx)
	if err != nil {
		st.stopWriter()
		return nil, fmt.Errorf("sqlite: reading the schema: %w", err)
	}
	st.advanced = advanced
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{{&st.rs.items, st.q.items}, {&st.rs.itemsData, st.q.itemsData}, {&st.rs.latestData, st.q.latestData}, {&st.rs.since, st.q.fq.since}} {
		if *p.dst, err = db.PrepareContext(ctx, p.query); err != nil {
			break
		}
	}
	if err != nil {
		st.stopWriter()
		st.closeStmts()
		return nil, fmt.Errorf("sqlite: preparing the reads: %w", err)
	}
	return st, nil
}

func (st *Store) closeStmts() {
	for _, s := range append([]*sql.Stmt{st.rs.items, st.rs.itemsData, st.rs.latestData, st.rs.since}, st.pageStmts.all()...) {
		if s != nil {
			_ = s.Close()
		}
	}
}

// DB returns the Store's database, for queries of your own (usage
// reports, migrations). Do not close it; Close does, when Open opened it.
func (st *Store) DB() *sql.DB { return st.db }

// Close makes every later call on the Store and its sessions fail with
// session.ErrClosed, and closes the database if Open opened it. Calls in
// progress finish or fail: a write the writer already took commits (or
// fails) before Close returns, one still queued fails with ErrClosed. Close
// is idempotent.
func (st *Store) Close() error {
	st.closed.Store(true)
	if st.closing.Swap(true) {
		return nil
	}
	st.stopWriter()
	st.closeStmts()
	if !st.owned {
		return nil
	}
	if err := st.db.Close(); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// Session returns a handle on session id. Any non-empty string is a valid
// id; it only ever reaches SQL as a bound parameter. Handles are cheap and
// safe for concurrent use, and two handles on one id see one history.
func (st *Store) Session(id string) (*Session, error) {
	if err := driver.ValidateID(id); err != nil {
		return nil, err
	}
	if st.closed.Load() {
		return nil, session.ErrClosed
	}
	return &Session{st: st, id: id}, nil
}

// check returns the error a call must fail with before doing anything: the
// context's, or ErrClosed.
func (st *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st.closed.Load() {
		return session.ErrClosed
	}
	return nil
}

// wrap turns err from operation op into the error a caller sees: the
// context's error when ctx ended (the driver reports an interrupted
// statement in its own words), ErrClosed after Close.
func (st *Store) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlite: %s: %w (%v)", op, cerr, err)
	}
	if st.closed.Load() && !errors.Is(err, session.ErrClosed) {
		return fmt.Errorf("sqlite: %s: %w (%v)", op, session.ErrClosed, err)
	}
	if isTooBig(err) {
		return fmt.Errorf("sqlite: %s: %w: %w", op, session.ErrBatchTooLarge, err)
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// checkReadOnlyPath refuses, before SQLite sees it, a path Options.ReadOnly
// cannot open: an in-memory database, or a file that does not exist.
func checkReadOnlyPath(path string) error {
	if inMemory(path) {
		return fmt.Errorf("%w: ReadOnly with an in-memory database, which would be empty", ErrInvalidOptions)
	}
	if strings.HasPrefix(path, "file:") {
		return nil // SQLite reports a missing file itself: mode=ro never creates one
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("sqlite: open %q read-only: %w", path, causeOf(err))
	}
	return nil
}
