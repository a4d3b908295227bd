package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// ErrNoSchema reports, with Options.SkipCreateTables, a database without
// the session tables.
var ErrNoSchema = errors.New("postgres: session tables missing")

// queries holds every statement of a Store, built once from its names.
type queries struct {
	sessions, messages   string // qualified, quoted names
	sessionsReg, msgsReg string // names as to_regclass reads them
	timeIndex, idIndex   string // unquoted index names
	timeIndexReg         string
	idIndexReg           string

	createSchema, createSessions, createMessages, createTimeIndex, createIDIndex string

	upsertSession string // creates the session row or refreshes updated_at; locks it
	lockSession   string // locks the session row, if any
	insert        string // appends $2 (text[]) in array order
	insertOne     string // appends one row, as given
	items         string // all rows, oldest first
	latestTop     string // the newest rows, newest first
	latest        string // a window of rows below an id, newest first
	popObject     string // deletes the newest row if it is a JSON object, returning it
	restore       string // puts a row back by id
	deleteID      string // deletes one row by id, returning it
	clearMessages string
	clearSession  string
	list          string // sessions holding rows

	ck checkpointQueries
}

func newQueries(o Options) *queries {
	prefix, regPrefix := "", ""
	if o.Schema != "" {
		prefix, regPrefix = quote(o.Schema)+".", quote(o.Schema)+"."
	}
	s, m := prefix+quote(o.SessionsTable), prefix+quote(o.MessagesTable)
	timeIdx := "idx_" + o.MessagesTable + "_session_time"
	idIdx := "idx_" + o.MessagesTable + "_session_id"
	q := &queries{
		sessions: s, messages: m,
		sessionsReg: regPrefix + quote(o.SessionsTable), msgsReg: regPrefix + quote(o.MessagesTable),
		timeIndex: timeIdx, idIndex: idIdx,
		timeIndexReg: regPrefix + quote(timeIdx), idIndexReg: regPrefix + quote(idIdx),
	}
	if o.Schema != "" {
		q.createSchema = `CREATE SCHEMA IF NOT EXISTS ` + quote(o.Schema)
	}
	// The DDL is what SQLAlchemy's create_all emits for SQLAlchemySession's
	// tables on PostgreSQL, except that id is BIGSERIAL (int8) where
	// Integer gives SERIAL (int4): the same values, without the 2^31 limit
	// on rows ever stored. Go reads either.
	q.createSessions = `CREATE TABLE IF NOT EXISTS ` + s + ` (
	session_id VARCHAR NOT NULL,
	created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
	updated_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
	PRIMARY KEY (session_id)
)`
	q.createMessages = `CREATE TABLE IF NOT EXISTS ` + m + ` (
	id BIGSERIAL NOT NULL,
	session_id VARCHAR NOT NULL,
	message_data TEXT NOT NULL,
	created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY (session_id) REFERENCES ` + s + ` (session_id) ON DELETE CASCADE
)`
	q.createTimeIndex = `CREATE INDEX IF NOT EXISTS ` + quote(timeIdx) + ` ON ` + m + ` (session_id, created_at)`
	q.createIDIndex = `CREATE INDEX IF NOT EXISTS ` + quote(idIdx) + ` ON ` + m + ` (session_id, id)`

	// Python runs SELECT, INSERT if missing, and UPDATE updated_at after
	// the items; one upsert does all three, and takes the session row's
	// lock first, so that writers of one session queue there.
	q.upsertSession = `INSERT INTO ` + s + ` (session_id) VALUES ($1)
	ON CONFLICT (session_id) DO UPDATE SET updated_at = CURRENT_TIMESTAMP`
	q.lockSession = `SELECT 1 FROM ` + s + ` WHERE session_id = $1 FOR UPDATE`
	q.insert = `INSERT INTO ` + m + ` (session_id, message_data)
	SELECT $1, d FROM unnest($2::text[]) WITH ORDINALITY AS t(d, n) ORDER BY n`
	q.insertOne = `INSERT INTO ` + m + ` (session_id, message_data) VALUES ($1, $2)`
	// Reads name the session as a range of one value, session_id >= $1
	// AND session_id <= $1 (the same rows as = $1 under the column's
	// deterministic collation), and order by (session_id, id): with =, the
	// planner drops session_id from the order and may walk the primary key
	// from the table's newest row, filtering, when one session holds much
	// of the table; crossing every newer row of every other session. Only
	// the (session_id, id) index gives this order, so latest-N and pop walk
	// it from the session's newest row, in custom and generic plans alike.
	const oneSession = ` WHERE session_id >= $1 AND session_id <= $1`
	q.items = `SELECT id, message_data FROM ` + m + oneSession + ` ORDER BY session_id, id`
	q.latestTop = `SELECT id, message_data FROM ` + m + oneSession + ` ORDER BY session_id DESC, id DESC LIMIT $2`
	q.latest = `SELECT id, message_data FROM ` + m + oneSession + ` AND id < $2::bigint ORDER BY session_id DESC, id DESC LIMIT $3`
	// popObject deletes the newest row only if PostgreSQL's json parser,
	// which is strict RFC 8259 as session's validator is, reads it as one
	// object with at most 10000 brackets (the validator's depth limit), so
	// that it never deletes a row Go would call corrupt. A row that is not
	// JSON makes the cast fail the statement (nothing deleted); one that is
	// other JSON deletes nothing. The test runs on the one row the CTE
	// picked, never on other rows. An empty session gives one row of
	// NULLs, so that it needs no second look.
	q.popObject = `WITH top AS (SELECT id, message_data FROM ` + m + oneSession + ` ORDER BY session_id DESC, id DESC LIMIT 1),
	del AS (DELETE FROM ` + m + ` AS m USING top WHERE m.id = top.id
		AND json_typeof(top.message_data::json) = 'object'
		AND length(top.message_data) - length(translate(top.message_data, '[{', '')) <= 10000
		RETURNING m.id, m.message_data)
	SELECT id::bigint, message_data FROM del
	UNION ALL SELECT NULL::bigint, NULL::text WHERE NOT EXISTS (SELECT FROM top)`
	q.restore = `INSERT INTO ` + m + ` (id, session_id, message_data) VALUES ($1::bigint, $2, $3)`
	q.deleteID = `DELETE FROM ` + m + ` WHERE id = $1::bigint AND session_id = $2 RETURNING id, message_data`
	q.clearMessages = `DELETE FROM ` + m + ` WHERE session_id = $1`
	q.clearSession = `DELETE FROM ` + s + ` WHERE session_id = $1`
	q.list = `SELECT session_id FROM ` + s + ` AS s WHERE EXISTS (SELECT 1 FROM ` + m + ` AS m WHERE m.session_id = s.session_id) ORDER BY session_id`
	q.ck = newCheckpointQueries(prefix+quote(o.CheckpointsTable), regPrefix+quote(o.CheckpointsTable))
	return q
}

// schemaLockKey is the first key of the advisory lock that serialises
// schema creation across processes (CREATE TABLE IF NOT EXISTS races
// between two sessions otherwise fail on pg_type's unique index).
const schemaLockKey = 0x5e55_1045

// ensureSchema creates what is missing of the schema, tables and indexes
// (or, with skip, checks that the session tables exist).
//
// The checkpoints table is created with the others. In a database that
// has the others already (Python's, or one an older version of this
// package made), it is created on its own, and failing to (a role that
// may not create tables) is no reason to fail the open: the Store reads
// what it can, and the first checkpoint save creates the table or says
// why it cannot.
func (st *Store) ensureSchema(ctx context.Context, skip bool) error {
	var tables, timeIdx, idIdx, ck int
	err := st.pool.QueryRow(ctx, `SELECT
	(to_regclass($1) IS NOT NULL)::int + (to_regclass($2) IS NOT NULL)::int,
	(to_regclass($3) IS NOT NULL)::int, (to_regclass($4) IS NOT NULL)::int, (to_regclass($5) IS NOT NULL)::int`,
		st.q.sessionsReg, st.q.msgsReg, st.q.timeIndexReg, st.q.idIndexReg, st.q.ck.reg).Scan(&tables, &timeIdx, &idIdx, &ck)
	if err != nil {
		return st.wrap(ctx, "reading the schema", err)
	}
	st.ckReady.Store(ck == 1)
	if skip {
		if tables != 2 {
			return fmt.Errorf("%w: want tables %s and %s", ErrNoSchema, st.q.sessions, st.q.messages)
		}
		if idIdx == 0 {
			slog.WarnContext(ctx, "postgres: no index on (session_id, id); reads of the newest items will sort the whole session",
				"index", st.q.idIndex)
		}
		return nil
	}
	if tables == 2 && timeIdx == 1 && idIdx == 1 {
		if ck == 0 {
			if err := st.createCheckpoints(ctx); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				slog.WarnContext(ctx, "postgres: could not create the checkpoints table; the first checkpoint save tries again",
					"table", st.q.ck.table, "error", err)
			}
		}
		return nil
	}
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(schemaLockKey), st.q.msgsReg); err != nil {
			return err
		}
		for _, ddl := range []string{st.q.createSchema, st.q.createSessions, st.q.createMessages, st.q.createTimeIndex, st.q.createIDIndex, st.q.ck.create} {
			if ddl == "" {
				continue
			}
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		st.ckReady.Store(true)
	}
	return st.wrap(ctx, "create tables", err)
}
