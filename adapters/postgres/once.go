package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Operation ids.
//
// AddItemsOnce records its operation id in a table of this package's own,
// "<MessagesTable>_operations" (in Options.Schema), a row per (session_id,
// operation_id), both stored as storedID makes them; the Python SDK never
// reads it. One statement inserts the id ON CONFLICT DO NOTHING and, only
// if it did, the session row and the batch, in AddItems's implicit
// transaction, after its advisory lock and FOR UPDATE: the id is recorded
// if and only if the batch landed, and of two calls with one id the second
// waits for the first's commit and finds the id. Clear, PopItem and
// replaces leave the table alone; RemoveSession deletes the session's
// rows.

var _ session.OnceAppender = (*Session)(nil)

// opsQueries are the statements on the operation-id table.
type opsQueries struct {
	table, reg string // qualified, quoted name; as to_regclass reads it
	create     string
	once       string // records $3 and, if new, appends $2; returns 1 if new
	remove     string // deletes every id of a session
}

func newOpsQueries(q *queries, prefix, regPrefix, messages string) opsQueries {
	name := quote(messages + "_operations")
	t := prefix + name
	return opsQueries{
		table: t, reg: regPrefix + name,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	session_id VARCHAR NOT NULL,
	operation_id TEXT NOT NULL,
	created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
	PRIMARY KEY (session_id, operation_id)
)`,
		// The messages' foreign key is checked at the end of the
		// statement, once the session row of the sibling CTE is there.
		once: `WITH op AS (
	INSERT INTO ` + t + ` (session_id, operation_id) VALUES ($1, $3) ON CONFLICT DO NOTHING RETURNING 1
), sess AS (
	INSERT INTO ` + q.sessions + ` (session_id) SELECT $1 FROM op WHERE cardinality($2::text[]) > 0
	ON CONFLICT (session_id) DO UPDATE SET updated_at = CURRENT_TIMESTAMP
	RETURNING 1
), ins AS (
	INSERT INTO ` + q.messages + ` (session_id, message_data, created_at)
	SELECT $1::text, d, ` + q.stamp + ` FROM unnest($2::text[]) WITH ORDINALITY AS t(d, n)
	WHERE EXISTS (SELECT FROM op) ORDER BY n
	RETURNING 1
)
SELECT count(*)::int FROM op`,
		remove: `DELETE FROM ` + t + ` WHERE session_id = $1`,
	}
}

// AddItemsOnce appends items as one atomic batch, as AddItems does, unless
// a batch with opID was already appended to the session, and reports
// whether this call appended: one implicit transaction, sent in one round
// trip, with AddItems's locks. An empty batch records opID alone. An empty
// opID is session.ErrInvalidOperationID.
//
// An error wrapping session.ErrOutcomeUnknown means the batch (and the
// id) may have been committed; calling again with the same opID is safe
// and says which. Any other error means nothing was written.
func (s *Session) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	if opID == "" {
		return false, session.ErrInvalidOperationID
	}
	if err := driver.ValidateBatch(items); err != nil {
		return false, err
	}
	if err := s.st.check(ctx); err != nil {
		return false, err
	}
	op := fmt.Sprintf("add items once (operation %s) to session %s", quoteShort(opID), quoteShort(s.id))
	if _, err := s.st.opsReady(ctx, true); err != nil {
		return false, s.st.wrap(ctx, op, err)
	}
	var n int32
	err := s.write(ctx, op, func(b *batch) {
		b.queue(s.st.q.lockKey, s.sid)
		b.queue(s.st.q.lockSession, s.sid)
		b.queue(s.st.q.ops.once, s.sid, texts(items), storedID(opID))
		b.scan = []any{&n}
	})
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// opsReady reports whether the operation-id table exists, looking it up
// until it does. With create, a missing table is created, or, with
// SkipCreateTables, is an error wrapping ErrNoSchema.
func (st *Store) opsReady(ctx context.Context, create bool) (bool, error) {
	if st.opsExist.Load() {
		return true, nil
	}
	var ok bool
	if err := st.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, st.q.ops.reg).Scan(&ok); err != nil {
		return false, err
	}
	if ok || !create {
		st.opsExist.Store(ok)
		return ok, nil
	}
	if st.opts.SkipCreateTables {
		return false, fmt.Errorf("%w: no table %s for operation ids (Options.SkipCreateTables: create it as the package documentation shows)", ErrNoSchema, st.q.ops.table)
	}
	if err := st.createOps(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// createOps creates the operation-id table, under the advisory lock of
// schema creation.
func (st *Store) createOps(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(schemaLockKey), st.q.msgsReg); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, st.q.ops.create)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating the operation-id table %s: %w", st.q.ops.table, err)
	}
	st.opsExist.Store(true)
	return nil
}
