package sqlite

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/session"
)

// ErrAdvancedStore reports a write to a store of the Python SDK's
// AdvancedSQLiteSession. That class keeps, beside the base tables, a
// message_structure row per message (its branch and sequence), turn usage
// and branch bookkeeping; a row written without them is invisible to its
// get_items and deleted by its next pop_item as an orphan. So this package
// reads such a store (the "main" branch, in the class's order) and writes
// nothing to its history. It wraps session.ErrUnsupported.
var ErrAdvancedStore = fmt.Errorf("%w: the store belongs to the Python SDK's AdvancedSQLiteSession (it has a message_structure table); this package reads its main branch and writes nothing to its history", session.ErrUnsupported)

// advancedBranch is the branch read from an AdvancedSQLiteSession store:
// the one every instance of the class starts on.
const advancedBranch = "main"

// detectAdvanced reports whether the database holds AdvancedSQLiteSession's
// message_structure table.
func (st *Store) detectAdvanced(ctx context.Context) (bool, error) {
	var n int
	err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'message_structure'`).Scan(&n)
	return n > 0, err
}

// readAdvanced points the Store's reads at the main branch, ordered as the
// class orders them (by sequence_number, which stands in for the row id in
// the reads' paging and in corrupt-record positions).
func (q *queries) readAdvanced() {
	m := quote(q.messages)
	from := ` FROM ` + m + ` m JOIN message_structure s ON m.id = s.message_id WHERE m.session_id = ?1 AND s.branch_id = '` + advancedBranch + `'`
	q.items = `SELECT s.sequence_number, m.message_data` + from + ` ORDER BY s.sequence_number ASC`
	q.itemsData = `SELECT m.message_data` + from + ` ORDER BY s.sequence_number ASC`
	q.latest = `SELECT s.sequence_number, m.message_data` + from + ` AND s.sequence_number < ?2 ORDER BY s.sequence_number DESC LIMIT ?3`
	q.latestData = `SELECT m.message_data` + from + ` ORDER BY s.sequence_number DESC LIMIT ?2`
	q.fq = followQueries{advanced: true, since: `SELECT s.sequence_number, m.id, m.message_data` + from + ` AND s.sequence_number >= ?2 ORDER BY s.sequence_number ASC`}
}

// historyWritable refuses a write to the history of an
// AdvancedSQLiteSession store, as Open found it or as a write transaction
// last did (advancedNow). Writes check again in their transaction
// (historyWritableIn): this early answer saves the queueing.
func (st *Store) historyWritable() error {
	if st.advanced || st.advancedSeen.Load() {
		return ErrAdvancedStore
	}
	return nil
}

// historyWritableIn refuses, in the write transaction open on w, a write
// to the history of a database that is an AdvancedSQLiteSession store
// now: one whose class created its tables after the Store was opened. The
// error says nothing was written, so the other writes of the group go on.
func (st *Store) historyWritableIn(w *wconn) error {
	if st.advanced || w.advanced {
		return untouched(ErrAdvancedStore)
	}
	return nil
}

// advancedNow reports whether the database is an AdvancedSQLiteSession
// store, in the write transaction open on w (BEGIN IMMEDIATE: no other
// connection changes the schema until it ends). It reads the schema
// cookie (PRAGMA schema_version, from the header page the transaction
// holds anyway) and looks for the class's table again only when the
// cookie changed since the last look, so a write transaction pays one
// PRAGMA. A cookie it cannot read makes it look.
func (st *Store) advancedNow(ctx context.Context, w *wconn) bool {
	if st.advanced {
		return true
	}
	v, err := w.schemaVersion(ctx)
	if err == nil && v == st.schemaSeen.Load() {
		return st.advancedSeen.Load()
	}
	var n int
	if qerr := w.c.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'message_structure'`).Scan(&n); qerr != nil {
		return st.advancedSeen.Load()
	}
	st.advancedSeen.Store(n > 0)
	if err == nil {
		st.schemaSeen.Store(v)
	}
	return n > 0
}
