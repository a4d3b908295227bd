package sqlite

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentsessions/sessions/session/driver"
)

// Default table names, the Python SDK's.
const (
	DefaultSessionsTable = "agent_sessions"
	DefaultMessagesTable = "agent_messages"
)

// DefaultCheckpointsTable is the table of run-state checkpoints when
// Options.CheckpointsTable is "". The table is this package's own: the
// Python SDK has no such table and never reads it.
const DefaultCheckpointsTable = "agent_checkpoints"

// DefaultBusyTimeout is how long a write waits for another connection's
// lock on the database when Options.BusyTimeout is zero.
const DefaultBusyTimeout = 5 * time.Second

// ErrInvalidOptions reports an Options value Open or OpenDB cannot use.
var ErrInvalidOptions = errors.New("sqlite: invalid options")

// Options configures a Store. The zero value gives the Python SDK's layout
// and settings, so that Python's SQLiteSession and this package share one
// database file.
type Options struct {
	// SessionsTable names the table of session rows; "" means
	// "agent_sessions".
	SessionsTable string
	// MessagesTable names the table of items; "" means "agent_messages".
	// Its index is named "idx_<MessagesTable>_session_id", as in Python.
	//
	// Both names must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$; they are quoted
	// in every statement, so a name that is an SQL keyword is fine.
	MessagesTable string
	// CheckpointsTable names the table of the sessions' checkpoints
	// (session.CheckpointStore); "" means "agent_checkpoints". It is this
	// package's own table beside the Python SDK's two, which Python never
	// reads, with a row per checkpoint:
	//
	//	session_id TEXT, name TEXT, version INTEGER, document BLOB,
	//	updated_at TIMESTAMP, PRIMARY KEY (session_id, name)
	//
	// Open creates it along with the others (and, in a database that has
	// the others already, on its own; if that fails, the first checkpoint
	// save tries again and reports why). With SkipCreateTables or ReadOnly
	// it is never created: a missing table reads as no checkpoints, and
	// saves fail with an error wrapping ErrNoSchema (ErrReadOnly when
	// read-only). The name follows the rules of the other two and must
	// differ from both. Stores that share one file under different
	// SessionsTable and MessagesTable names share this table too (a
	// session id would name one set of checkpoints in both) unless each
	// gives its own CheckpointsTable.
	CheckpointsTable string
	// BusyTimeout bounds how long a write waits for the lock another
	// process (or another Store on the same file) holds; 0 means
	// DefaultBusyTimeout. Writes of one Store never wait for each other's
	// lock: they share transactions (see the package documentation). The
	// Store's writer retries BEGIN IMMEDIATE with short jittered pauses
	// for up to BusyTimeout since a write was queued. Open also sets it as
	// the connections' busy_timeout, for reads.
	BusyTimeout time.Duration
	// OnCorrupt receives a report for every stored record that is not a
	// JSON object (its Position is "id=<rowid>"); nil logs a slog warning.
	OnCorrupt driver.CorruptHandler
	// SkipCreateTables, when false (the default, as Python's create-on-open),
	// makes Open and OpenDB create the tables and index if they are
	// missing, with CREATE ... IF NOT EXISTS. When true, the schema is
	// someone else's job (a migration tool, a read-only role) and Open and
	// OpenDB only check that both tables exist.
	SkipCreateTables bool
	// ReadOnly opens the database file read-only (SQLite's mode=ro) and
	// creates nothing: a missing file is an error wrapping fs.ErrNotExist,
	// missing tables an error wrapping ErrNoSchema, and writes fail. The
	// journal mode is left as the file has it. It implies
	// SkipCreateTables, and cannot be used with ":memory:". A file no
	// connection has open (no -wal or -shm beside it) is read as
	// immutable, so that no file is created beside it: a writer that opens
	// it afterwards is seen only by a Store opened after that.
	ReadOnly bool
	// Synchronous is SQLite's synchronous setting for the Store's commits:
	// SyncFull (the default, "" means it) or SyncNormal. See the package
	// documentation for what each promises after a crash. Open sets it on
	// every connection; OpenDB sets it, when not "", on the connections it
	// writes with (every write of a Store goes through them).
	Synchronous Synchronous
}

// Synchronous names a value of SQLite's PRAGMA synchronous
// (https://sqlite.org/pragma.html#pragma_synchronous) in WAL mode.
type Synchronous string

// The synchronous settings a Store accepts.
const (
	// SyncFull syncs the write-ahead log to disk at every commit: a
	// write the caller was told succeeded survives a power loss or an
	// operating-system crash. The default.
	SyncFull Synchronous = "full"
	// SyncNormal syncs only at checkpoints: a committed write survives the
	// application crashing, but the last commits before a power loss or
	// an operating-system crash may be rolled back. The database is never
	// corrupted either way. Commits cost no fsync, so small writes are
	// several times faster.
	SyncNormal Synchronous = "normal"
)

// pragma returns the PRAGMA statement that selects s.
func (s Synchronous) pragma() string { return "PRAGMA synchronous = " + strings.ToUpper(string(s)) }

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// withDefaults returns o with defaults filled in, or an error wrapping
// ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	if o.SessionsTable == "" {
		o.SessionsTable = DefaultSessionsTable
	}
	if o.MessagesTable == "" {
		o.MessagesTable = DefaultMessagesTable
	}
	if o.CheckpointsTable == "" {
		o.CheckpointsTable = DefaultCheckpointsTable
	}
	for _, name := range []string{o.SessionsTable, o.MessagesTable, o.CheckpointsTable} {
		if !identRE.MatchString(name) {
			return o, fmt.Errorf("%w: table name %q is not an identifier matching %s", ErrInvalidOptions, name, identRE)
		}
	}
	if strings.EqualFold(o.SessionsTable, o.MessagesTable) {
		return o, fmt.Errorf("%w: sessions and messages tables are both %q", ErrInvalidOptions, o.SessionsTable)
	}
	for _, other := range []string{o.SessionsTable, o.MessagesTable} {
		if strings.EqualFold(o.CheckpointsTable, other) {
			return o, fmt.Errorf("%w: the checkpoints table is %q, as another table is", ErrInvalidOptions, other)
		}
	}
	switch Synchronous(strings.ToLower(string(o.Synchronous))) {
	case "":
		o.Synchronous = SyncFull
	case SyncFull, SyncNormal:
		o.Synchronous = Synchronous(strings.ToLower(string(o.Synchronous)))
	default:
		return o, fmt.Errorf("%w: Synchronous %q (want %q or %q)", ErrInvalidOptions, o.Synchronous, SyncFull, SyncNormal)
	}
	switch {
	case o.BusyTimeout == 0:
		o.BusyTimeout = DefaultBusyTimeout
	case o.BusyTimeout < 0:
		return o, fmt.Errorf("%w: negative BusyTimeout %v", ErrInvalidOptions, o.BusyTimeout)
	}
	return o, nil
}

// quote returns a validated identifier as a quoted SQL identifier.
func quote(ident string) string { return `"` + ident + `"` }

// DSN returns the data source name Open uses for path: path with the
// driver parameters that set the busy timeout, turn foreign keys on,
// select WAL journal mode and set Options.Synchronous on every connection. Give it to sql.Open("sqlite",
// ...) to configure a *sql.DB for OpenDB the same way.
//
// path is a file path, ":memory:", or a "file:" URI (https://sqlite.org/uri.html);
// it may already carry query parameters, which are kept.
func DSN(path string, opts Options) (string, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	if path == "" {
		return "", fmt.Errorf("%w: empty database path (use %q for a private in-memory database)", ErrInvalidOptions, ":memory:")
	}
	ms := o.BusyTimeout.Milliseconds()
	if ms == 0 {
		ms = 1
	}
	params := "_pragma=" + url.QueryEscape("busy_timeout("+strconv.FormatInt(ms, 10)+")") +
		"&_pragma=" + url.QueryEscape("foreign_keys(1)")
	if o.ReadOnly {
		// Only a "file:" URI reaches SQLite with its parameters.
		if !strings.HasPrefix(path, "file:") {
			path = fileURI(path)
		}
		params += "&mode=ro"
	} else {
		params += "&_pragma=" + url.QueryEscape("journal_mode(WAL)") +
			"&_pragma=" + url.QueryEscape("synchronous("+strings.ToUpper(string(o.Synchronous))+")")
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + params, nil
}

// fileURI returns the "file:" URI of a file path, escaping the characters
// a URI gives a meaning to.
func fileURI(path string) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if strings.HasPrefix(path, "/") {
		return "file://" + esc
	}
	return "file:" + esc
}

// inMemory reports whether path names an in-memory database, which lives
// only as long as a connection to it does.
func inMemory(path string) bool {
	name, query, _ := strings.Cut(path, "?")
	if name == ":memory:" {
		return true
	}
	if !strings.HasPrefix(name, "file:") {
		return false
	}
	if strings.HasPrefix(name, "file::memory:") {
		return true
	}
	q, err := url.ParseQuery(query)
	return err == nil && q.Get("mode") == "memory"
}
