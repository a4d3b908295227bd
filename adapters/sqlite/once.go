package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Operation ids.
//
// AddItemsOnce records its operation id in a table of this package's own,
// "<MessagesTable>_operations", a row per (session_id, operation_id); the
// Python SDK never reads it. The id's insert (ON CONFLICT DO NOTHING) and
// the batch are one request of the group-commit writer, so one
// transaction: the id is recorded if and only if the batch landed. A
// duplicate writes nothing and answers false without failing its group.
// Clear, PopItem and replaces leave the table alone; RemoveSession
// deletes the session's rows.

var _ session.OnceAppender = (*Session)(nil)

// opsQueries are the statements on the operation-id table.
type opsQueries struct {
	table  string // unquoted name
	create string
	record string // insert an id unless it is there
	remove string // delete every id of a session
}

func newOpsQueries(messages string) opsQueries {
	table := messages + "_operations"
	t := quote(table)
	return opsQueries{
		table: table,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
                session_id TEXT NOT NULL,
                operation_id TEXT NOT NULL,
                created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                PRIMARY KEY (session_id, operation_id)
            )`,
		record: `INSERT INTO ` + t + ` (session_id, operation_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING`,
		remove: `DELETE FROM ` + t + ` WHERE session_id = ?1`,
	}
}

// AddItemsOnce appends items as one atomic batch, as AddItems does, unless
// a batch with opID was already appended to the session, and reports
// whether this call appended. The id is recorded in the batch's
// transaction; an empty batch records it alone. An empty opID is
// session.ErrInvalidOperationID.
func (s *Session) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	if opID == "" {
		return false, session.ErrInvalidOperationID
	}
	if err := driver.ValidateBatch(items); err != nil {
		return false, err
	}
	var appended bool
	err := s.st.writeW(ctx, fmt.Sprintf("add items once (operation %q)", opID), false, func(ctx context.Context, w *wconn, _ bool) error {
		appended = false // a group that runs again decides again
		if err := s.st.ensureOps(ctx, w); err != nil {
			return err
		}
		n, err := w.execCount(ctx, s.st.q.ops.record, s.id, opID)
		if err != nil || n == 0 {
			return err
		}
		appended = true
		if len(items) == 0 {
			return nil
		}
		return s.insert(ctx, w, items)
	})
	if err != nil {
		return false, err
	}
	s.st.opsReady.Store(true)
	return appended, nil
}

// opsExist reports whether the operation-id table exists, looking it up
// until it does.
func (st *Store) opsExist(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (bool, error) {
	if st.opsReady.Load() {
		return true, nil
	}
	return tableExists(ctx, db, st.q.ops.table)
}

// ensureOps creates the operation-id table inside a write transaction if
// it is missing; with SkipCreateTables a missing table is ErrNoSchema.
func (st *Store) ensureOps(ctx context.Context, w *wconn) error {
	ok, err := st.opsExist(ctx, w.c)
	if err != nil || ok {
		return err
	}
	if st.opts.SkipCreateTables {
		return fmt.Errorf("%w: no table %q for operation ids (Options.SkipCreateTables: create it as the package documentation shows)", ErrNoSchema, st.q.ops.table)
	}
	return w.execOnce(ctx, st.q.ops.create)
}

// createOps creates the operation-id table of a database whose other
// tables exist; failing to is logged, not fatal: AddItemsOnce tries again.
func (st *Store) createOps(ctx context.Context) error {
	ok, err := st.opsExist(ctx, st.db)
	if err != nil || ok {
		st.opsReady.Store(ok)
		return err
	}
	err = st.writeW(ctx, "create the operation-id table", false, func(ctx context.Context, w *wconn, _ bool) error {
		return w.execOnce(ctx, st.q.ops.create)
	})
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		slog.WarnContext(ctx, "sqlite: could not create the operation-id table; the first AddItemsOnce tries again",
			"table", st.q.ops.table, "error", err)
		return nil
	}
	st.opsReady.Store(true)
	return nil
}
