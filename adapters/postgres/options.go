package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentsessions/sessions/session/driver"
)

// Default table names, the Python SDK's SQLAlchemySession's.
const (
	DefaultSessionsTable = "agent_sessions"
	DefaultMessagesTable = "agent_messages"
)

// DefaultCheckpointsTable is the table of run-state checkpoints when
// Options.CheckpointsTable is "". The table is this package's own: the
// Python SDK has no such table and never reads it.
const DefaultCheckpointsTable = "agent_checkpoints"

// ErrInvalidOptions reports an Options value Open or OpenPool cannot use.
var ErrInvalidOptions = errors.New("postgres: invalid options")

// Options configures a Store. The zero value gives the Python SDK's
// SQLAlchemySession layout, so that Python and Go share one database.
type Options struct {
	// Schema, when set, qualifies the tables ("schema"."table") and is
	// created if missing along with them; "" leaves the tables to the
	// connection's search_path, as SQLAlchemySession does.
	Schema string
	// SessionsTable names the table of session rows; "" means
	// "agent_sessions".
	SessionsTable string
	// MessagesTable names the table of items; "" means "agent_messages".
	// Its indexes are "idx_<MessagesTable>_session_time" (Python's, on
	// session_id, created_at) and "idx_<MessagesTable>_time_id" (on
	// session_id, created_at, id, which ordered reads walk).
	//
	// Names must match ^[A-Za-z_][A-Za-z0-9_]*$ and be at most 63 bytes
	// (46 for MessagesTable, so that its index names are not truncated);
	// they are quoted in every statement, so case is kept and SQL keywords
	// are fine.
	MessagesTable string
	// CheckpointsTable names the table of the sessions' checkpoints
	// (session.CheckpointStore); "" means "agent_checkpoints". It is this
	// package's own table beside the Python SDK's two, which Python never
	// reads, in the same schema, with a row per checkpoint:
	//
	//	session_id VARCHAR, name TEXT, version BIGINT, document BYTEA,
	//	updated_at TIMESTAMP, PRIMARY KEY (session_id, name)
	//
	// Open creates it along with the others (and, in a database that has
	// the others already, on its own; if that fails, say for a role that
	// may not create tables, Open still succeeds and the first checkpoint
	// save tries again and reports why). With SkipCreateTables it is never
	// created: a missing table reads as no checkpoints, and saves fail with
	// an error wrapping ErrNoSchema. The name follows the rules of
	// SessionsTable and must differ from the other two. Stores that share
	// one schema under different SessionsTable and MessagesTable names
	// share this table too (a session id would name one set of
	// checkpoints in both) unless each gives its own CheckpointsTable.
	CheckpointsTable string
	// OnCorrupt receives a report for every stored row whose message_data
	// is not a JSON object (its Position is "id=<id>"); nil logs a slog
	// warning.
	OnCorrupt driver.CorruptHandler
	// SkipCreateTables, when false (the default), makes Open and OpenPool
	// create the schema, tables and indexes that are missing, as Python's
	// create_tables=True does. When true, the schema is someone else's job
	// (a migration, a read-only role): Open and OpenPool only check that
	// both tables exist.
	SkipCreateTables bool
}

// identRE matches the identifiers Options accepts.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxIdent is PostgreSQL's identifier length (NAMEDATALEN-1); longer names
// are truncated by the server, which would make two names one.
const maxIdent = 63

// longestIndexSuffix is the longest text around MessagesTable in an index
// name: "idx_" + name + "_session_time".
const longestIndexSuffix = len("idx_") + len("_session_time")

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
	check := func(what, name string, max int) error {
		if !identRE.MatchString(name) || len(name) > max {
			return fmt.Errorf("%w: %s %q is not an identifier matching %s of at most %d bytes", ErrInvalidOptions, what, name, identRE, max)
		}
		return nil
	}
	if o.Schema != "" {
		if err := check("schema name", o.Schema, maxIdent); err != nil {
			return o, err
		}
	}
	if err := check("table name", o.SessionsTable, maxIdent); err != nil {
		return o, err
	}
	if err := check("table name", o.MessagesTable, maxIdent-longestIndexSuffix); err != nil {
		return o, err
	}
	if err := check("table name", o.CheckpointsTable, maxIdent); err != nil {
		return o, err
	}
	for _, other := range []string{o.SessionsTable, o.MessagesTable} {
		if strings.EqualFold(o.CheckpointsTable, other) {
			return o, fmt.Errorf("%w: the checkpoints table is %q, as another table is (or differs from it only in case)", ErrInvalidOptions, other)
		}
	}
	if o.SessionsTable == o.MessagesTable {
		return o, fmt.Errorf("%w: sessions and messages tables are both %q", ErrInvalidOptions, o.SessionsTable)
	}
	if strings.EqualFold(o.SessionsTable, o.MessagesTable) {
		// Quoted names differing only in case are distinct tables in
		// PostgreSQL but not in every tool that reads them.
		return o, fmt.Errorf("%w: sessions and messages tables %q and %q differ only in case", ErrInvalidOptions, o.SessionsTable, o.MessagesTable)
	}
	return o, nil
}

// quote returns a validated identifier as a quoted SQL identifier.
func quote(ident string) string { return `"` + ident + `"` }
