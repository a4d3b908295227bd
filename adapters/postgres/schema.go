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
	sessions, messages    string // qualified, quoted names
	sessionsReg, msgsReg  string // names as to_regclass reads them
	timeIndex, orderIndex string // unquoted index names
	timeIndexReg          string
	orderIndexReg         string

	createSchema, createSessions, createMessages, createTimeIndex, createOrderIndex string

	upsertSession string // creates the session row or refreshes updated_at
	lockKey       string // takes the session's advisory lock
	lockSession   string // locks the session row FOR UPDATE, if any
	insert        string // appends $2 (text[]) in array order, as one created_at
	insertOne     string // appends one row, as given
	items         string // all rows, oldest first
	latestTop     string // the newest rows, newest first
	latest        string // a window of rows below a (created_at, id), newest first
	popLock       string // lockKey and lockSession in one statement
	popObject     string // deletes the newest row if it is a JSON object, returning it
	hasRows       string // whether the session has rows
	restore       string // puts a row back by id, with its created_at
	deleteID      string // deletes one row by id, returning it
	clearMessages string
	clearSession  string
	list          string // sessions holding rows
	listPage      string // a page of list: after $1, at most $2
	version       string // the history's version (HistoryVersion)
	deleteVersion string // deletes the history, returning its version

	stamp string // the created_at of a batch (see insert)
	since string // the rows from a (created_at, id) on, oldest first (follow.go)

	ck  checkpointQueries
	ops opsQueries

	// listCk and listPageCk are list and listPage with the sessions that
	// hold checkpoints and no items, once the checkpoints table exists.
	listCk, listPageCk string
}

// objectCheck is true for a message_data that PostgreSQL's json parser,
// which is strict RFC 8259 as session's validator is, reads as one object
// with at most 10000 brackets (the validator's depth limit; a text of at
// most 10000 bytes cannot hold more, and octet_length is O(1)), so that a
// pop never deletes a row Go would call corrupt (FuzzStoredRecord).
const objectCheck = `json_typeof(message_data::json) = 'object'
	AND (octet_length(message_data) <= 10000
		OR octet_length(message_data) - octet_length(translate(message_data, '[{', '')) <= 10000)`

func newQueries(o Options) *queries {
	prefix, regPrefix := "", ""
	if o.Schema != "" {
		prefix, regPrefix = quote(o.Schema)+".", quote(o.Schema)+"."
	}
	s, m := prefix+quote(o.SessionsTable), prefix+quote(o.MessagesTable)
	timeIdx := "idx_" + o.MessagesTable + "_session_time"
	orderIdx := "idx_" + o.MessagesTable + "_time_id"
	q := &queries{
		sessions: s, messages: m,
		sessionsReg: regPrefix + quote(o.SessionsTable), msgsReg: regPrefix + quote(o.MessagesTable),
		timeIndex: timeIdx, orderIndex: orderIdx,
		timeIndexReg: regPrefix + quote(timeIdx), orderIndexReg: regPrefix + quote(orderIdx),
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
	q.createOrderIndex = `CREATE INDEX IF NOT EXISTS ` + quote(orderIdx) + ` ON ` + m + ` (session_id, created_at, id)`

	// Every write of items locks the session row FOR UPDATE before
	// anything else (lockSession), then creates it or refreshes
	// updated_at (upsertSession), as Python's add_items does with three
	// statements. FOR UPDATE, not the upsert's weaker lock, because it
	// conflicts with the FOR KEY SHARE lock that a Python insert's foreign
	// key check holds until its commit: a Go write waits for every Python
	// batch that has inserted a row, and Python batches wait for it.
	q.upsertSession = `INSERT INTO ` + s + ` (session_id) VALUES ($1)
	ON CONFLICT (session_id) DO UPDATE SET updated_at = CURRENT_TIMESTAMP`
	q.lockSession = `SELECT 1 FROM ` + s + ` WHERE session_id = $1 FOR UPDATE`
	// lockKey comes before lockSession: a transaction-scoped advisory lock
	// on a hash of the table and the session id, which exists whether or
	// not the session row does, so that the session's Go writers queue
	// even on a session that has no row yet (or whose row a Clear is
	// deleting), and never meet the row's locks in a cycle. (The hash of
	// two sessions may collide: they then queue together.)
	q.lockKey = `SELECT pg_advisory_xact_lock(hashtextextended('` + m + `:' || $1::text, 0))`
	// Reads name the session as a range of one value, session_id >= $1
	// AND session_id <= $1 (the same rows as = $1 under the column's
	// deterministic collation), and order by (session_id, created_at, id):
	// with =, the planner may drop session_id from the order and walk
	// another index, filtering, when one session holds much of the table.
	// Only the (session_id, created_at, id) index gives this order, so
	// latest-N and pop walk it from the session's newest row, in custom
	// and generic plans alike.
	const oneSession = ` WHERE session_id >= $1 AND session_id <= $1`
	const newestFirst = ` ORDER BY session_id DESC, created_at DESC, id DESC`
	// A batch's rows share one created_at, later than every row of the
	// session committed before it (the lock is held: no batch is in
	// flight) and than the clock, so that the batch sorts after them and
	// whole; the scalar subquery runs once.
	stamp := `(SELECT greatest(clock_timestamp()::timestamp,
		(SELECT created_at FROM ` + m + oneSession + newestFirst + ` LIMIT 1) + interval '1 microsecond'))`
	q.stamp = stamp
	q.insert = `INSERT INTO ` + m + ` (session_id, message_data, created_at)
	SELECT $1::text, d, ` + stamp + ` FROM unnest($2::text[]) WITH ORDINALITY AS t(d, n) ORDER BY n`
	q.insertOne = `INSERT INTO ` + m + ` (session_id, message_data, created_at) VALUES ($1::text, $2, ` + stamp + `)`
	q.items = `SELECT id, message_data FROM ` + m + oneSession + ` ORDER BY session_id, created_at, id`
	q.latestTop = `SELECT id, message_data FROM ` + m + oneSession + newestFirst + ` LIMIT $2`
	q.latest = `SELECT id, message_data, created_at::text AS cursor_at FROM ` + m + oneSession +
		` AND (created_at, id) < ($2::timestamp, $3::bigint)` + newestFirst + ` LIMIT $4`
	// popLock is lockKey then lockSession in one statement (one fewer for
	// the server to run in a pop's round trip), in that order: the
	// subquery that takes the advisory lock produces the row whose
	// projection evaluates the InitPlan that locks the session row. It
	// returns NULL when there is no session row.
	q.popLock = `SELECT (SELECT true FROM ` + s + ` WHERE session_id = $1 FOR UPDATE)
	FROM (SELECT pg_advisory_xact_lock(hashtextextended('` + m + `:' || $1::text, 0)) OFFSET 0) AS k`
	// popObject deletes the newest row only if it passes objectCheck. A
	// row that is not JSON makes the cast fail the statement (nothing
	// deleted); one that is other JSON deletes nothing. The test is a
	// filter on the one row the primary key finds for the id the InitPlan
	// picked, never on other rows. It runs after popLock, in the same
	// transaction: its snapshot is taken once the locks are held, so the
	// row it picks is the newest when the pop takes effect.
	q.popObject = `DELETE FROM ` + m + ` WHERE id = (SELECT id FROM ` + m + oneSession + newestFirst + ` LIMIT 1)
	AND ` + objectCheck + `
	RETURNING id, message_data, created_at::text`
	q.hasRows = `SELECT EXISTS (SELECT FROM ` + m + oneSession + `)`
	q.restore = `INSERT INTO ` + m + ` (id, session_id, message_data, created_at) VALUES ($1::bigint, $2, $3, $4::timestamp)`
	q.deleteID = `DELETE FROM ` + m + ` WHERE id = $1::bigint AND session_id = $2 RETURNING id, message_data`
	q.clearMessages = `DELETE FROM ` + m + ` WHERE session_id = $1`
	q.clearSession = `DELETE FROM ` + s + ` WHERE session_id = $1`
	q.list = `SELECT session_id FROM ` + s + ` AS s WHERE EXISTS (SELECT 1 FROM ` + m + ` AS m WHERE m.session_id = s.session_id) ORDER BY session_id`
	// The bound is repeated on m: pgx prepares the statement, and the
	// generic plan PostgreSQL switches to after five runs may merge-join
	// the two indexes, which without it reads the messages index from its
	// first session on every page (1.4 s a page at 1M sessions).
	q.listPage = `SELECT session_id FROM ` + s + ` AS s WHERE s.session_id > $1 AND EXISTS (SELECT 1 FROM ` + m + ` AS m WHERE m.session_id = s.session_id AND m.session_id > $1) ORDER BY session_id LIMIT $2`
	// A version is the count of the session's rows and a digest of their
	// ids and xmins in order: ids are never reused, and an UPDATE of a row
	// gives it a new xmin.
	const digest = `SELECT count(*), coalesce(md5(string_agg(id::text || '.' || xmin::text, ',' ORDER BY created_at, id)), '') FROM `
	q.version = digest + m + oneSession
	q.deleteVersion = `WITH d AS (DELETE FROM ` + m + ` WHERE session_id = $1 RETURNING id, xmin, created_at) ` + digest + `d`
	// since compares all three columns of the index as one row, so that
	// the index alone gives both its range and its order, and takes a
	// limit: custom and generic plans then walk the index from the cursor
	// on, never sort.
	q.since = `SELECT id, message_data, to_char(created_at, '` + cursorTimeFormat + `') FROM ` + m + oneSession +
		` AND (session_id, created_at, id) >= ($1, $2::timestamp, $3::bigint) ORDER BY session_id, created_at, id LIMIT $4`
	q.ck = newCheckpointQueries(prefix+quote(o.CheckpointsTable), regPrefix+quote(o.CheckpointsTable))
	q.listCk = `SELECT session_id FROM (SELECT session_id FROM ` + s + ` AS s WHERE EXISTS (SELECT 1 FROM ` + m + ` AS m WHERE m.session_id = s.session_id) UNION SELECT session_id FROM ` + q.ck.table + `) AS u ORDER BY session_id`
	// Each arm is a page of its own (listPage, and the first $2 distinct
	// ids of the checkpoints' primary key), so that a page sorts at most
	// twice its size, whatever the store's.
	q.listPageCk = `(` + q.listPage + `) UNION (SELECT DISTINCT session_id FROM ` + q.ck.table + ` WHERE session_id > $1 ORDER BY session_id LIMIT $2) ORDER BY session_id LIMIT $2`
	q.ops = newOpsQueries(q, prefix, regPrefix, o.MessagesTable)
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
	var tables, timeIdx, orderIdx, ck, ops int
	err := st.pool.QueryRow(ctx, `SELECT
	(to_regclass($1) IS NOT NULL)::int + (to_regclass($2) IS NOT NULL)::int,
	(to_regclass($3) IS NOT NULL)::int, (to_regclass($4) IS NOT NULL)::int, (to_regclass($5) IS NOT NULL)::int,
	(to_regclass($6) IS NOT NULL)::int`,
		st.q.sessionsReg, st.q.msgsReg, st.q.timeIndexReg, st.q.orderIndexReg, st.q.ck.reg, st.q.ops.reg).Scan(&tables, &timeIdx, &orderIdx, &ck, &ops)
	if err != nil {
		return st.wrap(ctx, "reading the schema", err)
	}
	st.ckReady.Store(ck == 1)
	st.opsExist.Store(ops == 1)
	if skip {
		if tables != 2 {
			return fmt.Errorf("%w: want tables %s and %s", ErrNoSchema, st.q.sessions, st.q.messages)
		}
		if orderIdx == 0 {
			slog.WarnContext(ctx, "postgres: no index on (session_id, created_at, id); reads of the newest items will sort the whole session",
				"index", st.q.orderIndex)
		}
		return nil
	}
	if tables == 2 && timeIdx == 1 {
		if orderIdx == 0 {
			// A store an older version of this package made, or Python's:
			// without the index reads are right, only slower.
			if err := st.createOrderIndex(ctx); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				slog.WarnContext(ctx, "postgres: could not create the index on (session_id, created_at, id); reads of the newest items will sort the whole session",
					"index", st.q.orderIndex, "error", err)
			}
		}
		if ck == 0 {
			if err := st.createCheckpoints(ctx); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				slog.WarnContext(ctx, "postgres: could not create the checkpoints table; the first checkpoint save tries again",
					"table", st.q.ck.table, "error", err)
			}
		}
		if ops == 0 {
			if err := st.createOps(ctx); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return cerr
				}
				slog.WarnContext(ctx, "postgres: could not create the operation-id table; the first AddItemsOnce tries again",
					"table", st.q.ops.table, "error", err)
			}
		}
		return nil
	}
	err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(schemaLockKey), st.q.msgsReg); err != nil {
			return err
		}
		for _, ddl := range []string{st.q.createSchema, st.q.createSessions, st.q.createMessages, st.q.createTimeIndex, st.q.createOrderIndex, st.q.ck.create, st.q.ops.create} {
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
		st.opsExist.Store(true)
	}
	return st.wrap(ctx, "create tables", err)
}

// createOrderIndex creates the (session_id, created_at, id) index, under
// the advisory lock of schema creation.
func (st *Store) createOrderIndex(ctx context.Context) error {
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(schemaLockKey), st.q.msgsReg); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, st.q.createOrderIndex)
		return err
	})
}
