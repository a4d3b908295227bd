package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// ErrNoSchema reports, with Options.SkipCreateTables, a database without
// the session tables.
var ErrNoSchema = errors.New("sqlite: session tables missing")

// queries holds every statement of a Store, built once from its table
// names. The layout is the Python SDK's SQLiteSession, statement for
// statement, so both share one file.
type queries struct {
	sessions, messages, index string // unquoted names
	ownIndex                  string // added beside an old Python index (checkIndex)

	createSessions, createMessages, createIndex, createOwnIndex string

	upsertSession string // creates the session row or refreshes updated_at
	insertPrefix  string // multi-row INSERT up to " VALUES "
	items         string // all rows, oldest first
	itemsData     string // items, message_data alone
	latestData    string // the newest ?2 rows' message_data, newest first
	latest        string // a window of rows below an id, newest first
	pop           string // delete the newest row, returning it
	deleteID      string // delete one row by id
	inserts       [maxCachedInsert + 1]string
	clearMessages string
	clearSession  string
	version       string // the history's version: row count and newest id

	ck  checkpointQueries
	ops opsQueries
	fq  followQueries
}

func newQueries(o Options) *queries {
	q := newQueryText(o)
	q.ck = newCheckpointQueries(o.CheckpointsTable)
	q.ops = newOpsQueries(o.MessagesTable)
	q.fq = newFollowQueries(o.MessagesTable)
	for n := 1; n <= maxCachedInsert; n++ {
		q.inserts[n] = q.buildInsert(n)
	}
	return q
}

func newQueryText(o Options) *queries {
	s, m := quote(o.SessionsTable), quote(o.MessagesTable)
	idx := "idx_" + o.MessagesTable + "_session_id"
	return &queries{
		sessions: o.SessionsTable,
		messages: o.MessagesTable,
		index:    idx,
		// The DDL is Python's (src/agents/memory/sqlite_session.py).
		createSessions: `CREATE TABLE IF NOT EXISTS ` + s + ` (
                session_id TEXT PRIMARY KEY,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
            )`,
		createMessages: `CREATE TABLE IF NOT EXISTS ` + m + ` (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                message_data TEXT NOT NULL,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                FOREIGN KEY (session_id) REFERENCES ` + s + ` (session_id)
                    ON DELETE CASCADE
            )`,
		createIndex: `CREATE INDEX IF NOT EXISTS ` + quote(idx) + `
            ON ` + m + ` (session_id, id)`,
		ownIndex: "agentsessions_" + o.MessagesTable + "_session_id_id",
		createOwnIndex: `CREATE INDEX IF NOT EXISTS ` + quote("agentsessions_"+o.MessagesTable+"_session_id_id") + `
            ON ` + m + ` (session_id, id)`,
		// Python runs INSERT OR IGNORE then UPDATE updated_at; one upsert
		// does both.
		upsertSession: `INSERT INTO ` + s + ` (session_id) VALUES (?1)
            ON CONFLICT (session_id) DO UPDATE SET updated_at = CURRENT_TIMESTAMP`,
		insertPrefix:  `INSERT INTO ` + m + ` (session_id, message_data) VALUES `,
		items:         `SELECT id, message_data FROM ` + m + ` WHERE session_id = ?1 ORDER BY id ASC`,
		itemsData:     `SELECT message_data FROM ` + m + ` WHERE session_id = ?1 ORDER BY id ASC`,
		latest:        `SELECT id, message_data FROM ` + m + ` WHERE session_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3`,
		latestData:    `SELECT message_data FROM ` + m + ` WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2`,
		pop:           `DELETE FROM ` + m + ` WHERE id = (SELECT id FROM ` + m + ` WHERE session_id = ?1 ORDER BY id DESC LIMIT 1) RETURNING message_data`,
		deleteID:      `DELETE FROM ` + m + ` WHERE id = ?1`,
		clearMessages: `DELETE FROM ` + m + ` WHERE session_id = ?1`,
		clearSession:  `DELETE FROM ` + s + ` WHERE session_id = ?1`,
		version:       `SELECT count(*) || ':' || coalesce(max(id), 0) FROM ` + m + ` WHERE session_id = ?1`,
	}
}

// maxRowsPerInsert bounds the rows of one INSERT statement: each row binds
// one parameter (the session id is ?1, shared), and SQLite builds before
// 3.32 allow only 999.
const maxRowsPerInsert = 500

// insertSQL returns the INSERT of n rows (n <= maxRowsPerInsert):
// (?1, ?2), (?1, ?3), ...
func (q *queries) insertSQL(n int) string {
	if n <= maxCachedInsert {
		return q.inserts[n]
	}
	return q.buildInsert(n)
}

func (q *queries) buildInsert(n int) string {
	var b strings.Builder
	b.Grow(len(q.insertPrefix) + n*12)
	b.WriteString(q.insertPrefix)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?1, ?")
		b.WriteString(strconv.Itoa(i + 2))
		b.WriteByte(')')
	}
	return b.String()
}

// schemaObjects counts which of the tables and the index exist.
func (q *queries) schemaObjects(ctx context.Context, db *sql.DB) (tables, index int, err error) {
	err = db.QueryRowContext(ctx, `SELECT
            count(CASE WHEN type = 'table' AND lower(name) IN (lower(?1), lower(?2)) THEN 1 END),
            count(CASE WHEN type = 'index' AND lower(name) = lower(?3) THEN 1 END)
        FROM sqlite_master`, q.sessions, q.messages, q.index).Scan(&tables, &index)
	return tables, index, err
}

// ensureSchema creates the tables and index if missing (or, with skip,
// checks that the session tables exist).
//
// The checkpoints table is created with the others. In a database that
// has the others already (Python's, or one an older version of this
// package made), it is created on its own, and failing to is no reason to
// fail the open: the Store reads what it can, and the first checkpoint
// save creates it or says why it cannot.
func (st *Store) ensureSchema(ctx context.Context, skip bool) error {
	tables, index, err := st.q.schemaObjects(ctx, st.db)
	if err != nil {
		return fmt.Errorf("sqlite: reading the schema: %w", err)
	}
	if index == 1 {
		st.checkIndex(ctx, !skip)
	}
	if _, err := st.checkpointsReady(ctx); err != nil {
		return fmt.Errorf("sqlite: reading the schema: %w", err)
	}
	if skip {
		if tables != 2 {
			return fmt.Errorf("%w: want tables %q and %q", ErrNoSchema, st.q.sessions, st.q.messages)
		}
		return nil
	}
	if tables == 2 && index == 1 {
		if !st.ckReady.Load() {
			err := st.writeW(ctx, "create the checkpoints table", false, func(ctx context.Context, w *wconn, _ bool) error {
				return w.execOnce(ctx, st.q.ck.create)
			})
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				slog.WarnContext(ctx, "sqlite: could not create the checkpoints table; the first checkpoint save tries again",
					"table", st.q.ck.table, "error", err)
			} else {
				st.ckReady.Store(true)
			}
		}
		return st.createOps(ctx)
	}
	err = st.writeW(ctx, "create tables", false, func(ctx context.Context, w *wconn, _ bool) error {
		for _, ddl := range []string{st.q.createSessions, st.q.createMessages, st.q.createIndex, st.q.ck.create, st.q.ops.create} {
			if err := w.execOnce(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		st.ckReady.Store(true)
		st.opsReady.Store(true)
	}
	return err
}

// checkIndex looks at the session index of a database that has one. The
// Python SDK's stores made before its 0.7 index (session_id, created_at)
// under the same name, and then every read of the newest items sorts the
// whole session. A read-write open adds an index on (session_id, id) under
// a name of this package's own (Python's class ignores it) and says so
// once; otherwise checkIndex warns and names what adds it.
func (st *Store) checkIndex(ctx context.Context, create bool) {
	var cols string
	err := st.db.QueryRowContext(ctx,
		`SELECT group_concat(name, ',') FROM (SELECT name FROM pragma_index_info(?1) ORDER BY seqno)`, st.q.index).Scan(&cols)
	if err != nil || cols == "session_id,id" {
		return
	}
	var ours int
	if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1`, st.q.ownIndex).Scan(&ours); err != nil || ours == 1 {
		return
	}
	if !create {
		slog.WarnContext(ctx, "sqlite: the session index is not on (session_id, id); reads of the newest items will sort the whole session; opening the store read-write once (sessionctl check URL, or any program using this package) adds one",
			"index", st.q.index, "columns", cols)
		return
	}
	err = st.writeW(ctx, "add the session index", false, func(ctx context.Context, w *wconn, _ bool) error {
		return w.execOnce(ctx, st.q.createOwnIndex)
	})
	if err != nil {
		slog.WarnContext(ctx, "sqlite: the session index is not on (session_id, id), and adding one failed; reads of the newest items will sort the whole session",
			"index", st.q.index, "columns", cols, "error", err)
		return
	}
	slog.InfoContext(ctx, "sqlite: added an index on (session_id, id) beside the Python SDK's older one on ("+cols+"), so that reads of the newest items stay O(limit)",
		"index", st.q.ownIndex, "table", st.q.messages)
}
