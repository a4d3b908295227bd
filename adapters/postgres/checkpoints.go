package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Checkpoints.
//
// A session's checkpoints (session.CheckpointStore) are rows of a table of
// this package's own, Options.CheckpointsTable, beside the Python SDK's
// tables; Python never reads it. A row is (session_id, name, version,
// document, updated_at) with primary key (session_id, name); session_id
// and name are stored as storedID makes them. No foreign key ties it to
// the sessions table: Clear deletes the session row and keeps the
// checkpoints, and a session may hold checkpoints and no items.
//
// The version check is the statement that writes, each RETURNING the new
// version (no row: the check failed, nothing was written): version 0
// inserts ON CONFLICT DO NOTHING, version v > 0 updates WHERE version = v,
// AnyVersion upserts. Under READ COMMITTED a save that finds the row
// locked by another waits for it and checks the version of the row that
// other one committed, so of two saves at one version only one succeeds;
// two creates meet on the primary key the same way.

var _ session.CheckpointCommitter = (*Session)(nil)

// checkpointQueries are the statements on the checkpoints table.
type checkpointQueries struct {
	table, reg string // qualified, quoted name; as to_regclass reads it
	create     string
	load       string // document and version of one checkpoint
	version    string // version of one checkpoint
	list       string // names of a session's checkpoints
	insert     string // version 0: insert version 1 unless the row exists
	update     string // version v: the row at version v moves to v+1
	upsert     string // AnyVersion: insert version 1 or advance the row
	// strictInsert and strictUpdate are insert and update failing when
	// they write nothing (see strict), for a batch that must roll back.
	strictInsert, strictUpdate string
	del                        string // delete one checkpoint
	delAt                      string // delete one checkpoint at a version
	remove                     string // delete every checkpoint of a session
}

// strict wraps a checkpoint statement so that a version check that fails
// fails the statement, and with it the implicit transaction of the batch
// it is sent in: when the statement wrote no row, a second insert writes
// a NULL version, a not-null violation on the version column (which no
// other statement of the adapter can raise; see isStrictConflict).
// PostgreSQL has no RAISE outside PL/pgSQL, and a failing cast of a
// constant would fail at planning, whatever the check.
func strict(t, stmt string) string {
	return `WITH w AS (` + stmt + `), f AS (INSERT INTO ` + t + ` (session_id, name, version, document)
	SELECT $1, $2, NULL, ''::bytea WHERE NOT EXISTS (SELECT FROM w)) SELECT version FROM w`
}

// isStrictConflict reports whether err is the failure of a strict
// statement whose version check failed.
func isStrictConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23502" && pgErr.ColumnName == "version"
}

func newCheckpointQueries(t, reg string) checkpointQueries {
	const one = ` WHERE session_id = $1 AND name = $2`
	q := checkpointQueries{
		table: t, reg: reg,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	session_id VARCHAR NOT NULL,
	name TEXT NOT NULL,
	version BIGINT NOT NULL,
	document BYTEA NOT NULL,
	updated_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
	PRIMARY KEY (session_id, name)
)`,
		load:    `SELECT document, version FROM ` + t + one,
		version: `SELECT version FROM ` + t + one,
		list:    `SELECT name FROM ` + t + ` WHERE session_id = $1`,
		insert: `INSERT INTO ` + t + ` (session_id, name, version, document) VALUES ($1, $2, 1, $3)
	ON CONFLICT (session_id, name) DO NOTHING RETURNING version`,
		update: `UPDATE ` + t + ` SET version = version + 1, document = $3, updated_at = CURRENT_TIMESTAMP` + one + ` AND version = $4::bigint
	RETURNING version`,
		upsert: `INSERT INTO ` + t + ` AS c (session_id, name, version, document) VALUES ($1, $2, 1, $3)
	ON CONFLICT (session_id, name) DO UPDATE SET version = c.version + 1, document = EXCLUDED.document, updated_at = CURRENT_TIMESTAMP
	RETURNING version`,
		del:    `DELETE FROM ` + t + one,
		delAt:  `DELETE FROM ` + t + one + ` AND version = $3::bigint`,
		remove: `DELETE FROM ` + t + ` WHERE session_id = $1`,
	}
	q.strictInsert, q.strictUpdate = strict(t, q.insert), strict(t, q.update)
	return q
}

// checkpointsReady reports whether the checkpoints table exists, looking
// it up until it does (another Store, or a migration, may create it while
// this one is open). With create, a missing table is created, or, with
// SkipCreateTables, is an error wrapping ErrNoSchema.
func (st *Store) checkpointsReady(ctx context.Context, create bool) (bool, error) {
	if st.ckReady.Load() {
		return true, nil
	}
	var ok bool
	if err := st.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, st.q.ck.reg).Scan(&ok); err != nil {
		return false, err
	}
	if ok {
		st.ckReady.Store(true)
		return true, nil
	}
	if !create {
		return false, nil
	}
	if st.opts.SkipCreateTables {
		return false, fmt.Errorf("%w: no table %s for checkpoints (Options.SkipCreateTables: create it as Options.CheckpointsTable documents)", ErrNoSchema, st.q.ck.table)
	}
	if err := st.createCheckpoints(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// createCheckpoints creates the checkpoints table, under the advisory lock
// of schema creation.
func (st *Store) createCheckpoints(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(schemaLockKey), st.q.msgsReg); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, st.q.ck.create)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating the checkpoints table %s: %w", st.q.ck.table, err)
	}
	st.ckReady.Store(true)
	return nil
}

// LoadCheckpoint returns the document stored under name and its version;
// an error wrapping session.ErrNoCheckpoint when there is none. One
// statement.
func (s *Session) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	if err := validCheckpointName(name); err != nil {
		return nil, 0, err
	}
	if err := s.st.check(ctx); err != nil {
		return nil, 0, err
	}
	op := s.ckOp("load", name)
	ok, err := s.st.checkpointsReady(ctx, false)
	if err != nil {
		return nil, 0, s.st.wrap(ctx, op, err)
	}
	if !ok {
		return nil, 0, fmt.Errorf("postgres: %s: %w", op, session.ErrNoCheckpoint)
	}
	var (
		doc     []byte
		version int64
	)
	err = s.st.pool.QueryRow(ctx, s.st.q.ck.load, s.sid, storedID(name)).Scan(&doc, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, fmt.Errorf("postgres: %s: %w", op, session.ErrNoCheckpoint)
	}
	if err != nil {
		return nil, 0, s.st.wrap(ctx, op, err)
	}
	if doc == nil {
		doc = []byte{}
	}
	return doc, version, nil
}

// SaveCheckpoint stores doc under name if the stored version is version
// (0: none is stored; session.AnyVersion: whatever is), and returns the
// new version; otherwise it returns an error wrapping
// session.ErrCheckpointConflict and writes nothing. One statement, in
// autocommit.
func (s *Session) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	return s.AppendWithCheckpoint(ctx, nil, name, doc, version)
}

// AppendWithCheckpoint appends items as one batch, exactly as AddItems
// does, and saves doc under name, as SaveCheckpoint does, in one
// transaction sent in one round trip, as AddItems's: the checkpoint
// statement first, made to fail when its version check fails (see
// strict), so that a version that is not the stored one rolls the whole
// batch back (the error wraps session.ErrCheckpointConflict); then
// AddItems's locks, session-row upsert and insert, in the batch's implicit
// transaction. An empty batch only saves the checkpoint, in one statement.
// An error wrapping session.ErrOutcomeUnknown means the save (and the
// batch) may have been committed: the deadline passed or the connection
// failed once the batch was sent. Any other error means nothing was
// written.
func (s *Session) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	if err := validCheckpoint(name, doc); err != nil {
		return 0, err
	}
	if err := driver.ValidateBatch(items); err != nil {
		return 0, err
	}
	if err := s.st.check(ctx); err != nil {
		return 0, err
	}
	fail := func(err error) (int64, error) { return 0, s.st.wrap(ctx, s.saveOp(name, len(items)), err) }
	if _, err := s.st.checkpointsReady(ctx, true); err != nil {
		return fail(err)
	}
	sql, args := s.saveStatement(name, doc, version, len(items) > 0)
	if sql == "" {
		return fail(s.conflict(ctx, s.st.pool, name, version))
	}
	c, err := s.st.pool.Acquire(ctx)
	if err != nil {
		return fail(err)
	}
	defer c.Release()
	var next int64
	if len(items) == 0 {
		err = c.QueryRow(ctx, sql, args...).Scan(&next)
		if errors.Is(err, pgx.ErrNoRows) {
			err = s.conflict(ctx, c, name, version)
		} else {
			err = sent(s.idError(err))
		}
	} else {
		next, err = s.appendWithCheckpoint(ctx, c, items, name, version, sql, args)
	}
	if err != nil {
		return fail(err)
	}
	return next, nil
}

// saveOp names AppendWithCheckpoint of n items in errors; made only when
// one is returned.
func (s *Session) saveOp(name string, n int) string {
	if n == 0 {
		return s.ckOp("save", name)
	}
	return fmt.Sprintf("append %d items with checkpoint %s of session %s", n, quoteShort(name), quoteShort(s.id))
}

// appendWithCheckpoint sends AppendWithCheckpoint's batch on c: the strict
// checkpoint statement, then what AddItems sends.
func (s *Session) appendWithCheckpoint(ctx context.Context, c *pgxpool.Conn, items []session.Item, name string, version int64, sql string, args []any) (int64, error) {
	var b pgx.Batch
	b.Queue(sql, args...)
	b.Queue(s.st.q.lockKey, s.sid)
	b.Queue(s.st.q.lockSession, s.sid)
	b.Queue(s.st.q.upsertSession, s.sid)
	b.Queue(s.st.q.insert, s.sid, texts(items))
	br := c.SendBatch(ctx, &b)
	var next int64
	err := br.QueryRow().Scan(&next)
	for i := 1; i < b.Len() && err == nil; i++ {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if isStrictConflict(err) || errors.Is(err, pgx.ErrNoRows) {
		// The check failed and the batch rolled back: nothing was written.
		return 0, s.conflict(ctx, c, name, version)
	}
	if err != nil {
		return 0, sent(s.idError(err))
	}
	return next, nil
}

// saveStatement returns the checkpoint statement for version and its
// arguments; "" for a version no checkpoint is ever at (below AnyVersion).
// A strict statement fails when the check fails, rather than return no
// row.
func (s *Session) saveStatement(name string, doc []byte, version int64, strict bool) (string, []any) {
	q := &s.st.q.ck
	args := []any{s.sid, storedID(name), doc}
	switch {
	case version == session.AnyVersion:
		return q.upsert, args
	case version == 0 && strict:
		return q.strictInsert, args
	case version == 0:
		return q.insert, args
	case version > 0 && strict:
		return q.strictUpdate, append(args, version)
	case version > 0:
		return q.update, append(args, version)
	}
	return "", nil
}

// querier is what conflict reads the stored version with: the pool, or a
// connection in a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// conflict returns the error of a version check that failed, naming the
// stored version (0: none).
func (s *Session) conflict(ctx context.Context, q querier, name string, version int64) error {
	stored, err := s.storedVersion(ctx, q, name)
	if err != nil {
		return fmt.Errorf("%w: the stored version is not %d (reading it: %v)", session.ErrCheckpointConflict, version, err)
	}
	return fmt.Errorf("%w: the stored version is %d, not %d", session.ErrCheckpointConflict, stored, version)
}

// storedVersion returns the version of checkpoint name, 0 when there is
// none.
func (s *Session) storedVersion(ctx context.Context, q querier, name string) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, s.st.q.ck.version, s.sid, storedID(name)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// DeleteCheckpoint removes the checkpoint under name if its stored version
// is version (session.AnyVersion: whatever it is), and otherwise returns
// an error wrapping session.ErrCheckpointConflict. Deleting a checkpoint
// that is not there succeeds for version 0 and AnyVersion. One statement
// (and a read of the stored version when it deletes nothing).
func (s *Session) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	if err := validCheckpointName(name); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	op := s.ckOp("delete", name)
	q := &s.st.q.ck
	ok, err := s.st.checkpointsReady(ctx, false)
	if err != nil {
		return s.st.wrap(ctx, op, err)
	}
	if !ok {
		if version == 0 || version == session.AnyVersion {
			return nil
		}
		return fmt.Errorf("postgres: %s: %w: the stored version is 0, not %d", op, session.ErrCheckpointConflict, version)
	}
	if version == session.AnyVersion {
		_, err := s.st.pool.Exec(ctx, q.del, s.sid, storedID(name))
		return s.st.wrap(ctx, op, sent(err))
	}
	if version > 0 {
		tag, err := s.st.pool.Exec(ctx, q.delAt, s.sid, storedID(name), version)
		if err != nil {
			return s.st.wrap(ctx, op, sent(err))
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
	}
	stored, err := s.storedVersion(ctx, s.st.pool, name)
	if err != nil {
		return s.st.wrap(ctx, op, err)
	}
	if version == 0 && stored == 0 {
		return nil // not there, as version 0 says
	}
	return fmt.Errorf("postgres: %s: %w: the stored version is %d, not %d", op, session.ErrCheckpointConflict, stored, version)
}

// ListCheckpoints returns the names of the session's checkpoints, sorted
// (as sort.Strings sorts them, whatever the server's collation).
func (s *Session) ListCheckpoints(ctx context.Context) ([]string, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("list the checkpoints of session %s", quoteShort(s.id))
	names := []string{}
	ok, err := s.st.checkpointsReady(ctx, false)
	if err != nil || !ok {
		return names, s.st.wrap(ctx, op, err)
	}
	rows, err := s.st.pool.Query(ctx, s.st.q.ck.list, s.sid)
	if err != nil {
		return nil, s.st.wrap(ctx, op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, s.st.wrap(ctx, op, err)
		}
		names = append(names, sessionID(n))
	}
	if err := rows.Err(); err != nil {
		return nil, s.st.wrap(ctx, op, err)
	}
	sort.Strings(names)
	return names, nil
}

// ckOp names a checkpoint operation in errors: never the document.
func (s *Session) ckOp(verb, name string) string {
	return fmt.Sprintf("%s checkpoint %s of session %s", verb, quoteShort(name), quoteShort(s.id))
}

// RemoveSession deletes everything the Store holds for session id, in one
// implicit transaction sent in one round trip: its checkpoints and
// operation ids (which Clear keeps), its items and its session row. It is conformance.Remover's
// method, so that a check leaves no trace. The checkpoints go first, as
// AppendWithCheckpoint locks its checkpoint row before the session row:
// the two never wait for each other in a cycle.
func (st *Store) RemoveSession(ctx context.Context, id string) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	if err := st.check(ctx); err != nil {
		return err
	}
	op := fmt.Sprintf("remove session %s", quoteShort(id))
	ok, err := st.checkpointsReady(ctx, false)
	if err != nil {
		return st.wrap(ctx, op, err)
	}
	ops, err := st.opsReady(ctx, false)
	if err != nil {
		return st.wrap(ctx, op, err)
	}
	return s.write(ctx, op, func(b *batch) {
		if ok {
			b.queue(st.q.ck.remove, s.sid)
		}
		b.queue(st.q.lockKey, s.sid)
		b.queue(st.q.lockSession, s.sid)
		if ops {
			// After the locks AddItemsOnce takes before its id's row.
			b.queue(st.q.ops.remove, s.sid)
		}
		b.queue(st.q.clearMessages, s.sid)
		b.queue(st.q.clearSession, s.sid)
	})
}

// validCheckpoint refuses an empty name or document.
func validCheckpoint(name string, doc []byte) error {
	if err := driver.ValidateCheckpoint(name, doc); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

func validCheckpointName(name string) error {
	if err := driver.ValidateCheckpointName(name); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}
