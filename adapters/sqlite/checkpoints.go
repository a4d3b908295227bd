package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Checkpoints.
//
// A session's checkpoints (session.CheckpointStore) are rows of a table of
// this package's own, Options.CheckpointsTable, beside the Python SDK's
// tables; Python never reads it. A row is (session_id, name, version,
// document, updated_at) with primary key (session_id, name). No foreign
// key ties it to the sessions table: Clear deletes the session row and
// keeps the checkpoints, and a session may hold checkpoints and no items.
//
// Every save and delete is a write of the Store's group-commit writer, so
// AppendWithCheckpoint's checkpoint statement and its batch insert are one
// transaction (with whatever else the group carries). The version check is
// the statement itself: version 0 inserts and does nothing when the row is
// there, version v > 0 updates the row whose version is v, and AnyVersion
// upserts. A check that fails has written nothing, and the group goes on
// without rolling back (untouched, in writer.go).

var _ session.CheckpointCommitter = (*Session)(nil)

// checkpointQueries are the statements on the checkpoints table.
type checkpointQueries struct {
	table   string // unquoted name
	create  string
	load    string // document and version of one checkpoint
	version string // version of one checkpoint
	list    string // names of a session's checkpoints
	insert  string // version 0: insert version 1 unless the row exists
	update  string // version v: the row at version v moves to v+1
	upsert  string // AnyVersion: insert version 1 or advance the row, returning the version
	del     string // delete one checkpoint
	delAt   string // delete one checkpoint at a version
	remove  string // delete every checkpoint of a session
}

func newCheckpointQueries(table string) checkpointQueries {
	t := quote(table)
	const one = ` WHERE session_id = ?1 AND name = ?2`
	return checkpointQueries{
		table: table,
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (
                session_id TEXT NOT NULL,
                name TEXT NOT NULL,
                version INTEGER NOT NULL,
                document BLOB NOT NULL,
                updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                PRIMARY KEY (session_id, name)
            )`,
		load:    `SELECT document, version FROM ` + t + one,
		version: `SELECT version FROM ` + t + one,
		list:    `SELECT name FROM ` + t + ` WHERE session_id = ?1 ORDER BY name`,
		insert: `INSERT INTO ` + t + ` (session_id, name, version, document) VALUES (?1, ?2, 1, ?3)
            ON CONFLICT (session_id, name) DO NOTHING`,
		update: `UPDATE ` + t + ` SET version = version + 1, document = ?3, updated_at = CURRENT_TIMESTAMP` + one + ` AND version = ?4`,
		upsert: `INSERT INTO ` + t + ` (session_id, name, version, document) VALUES (?1, ?2, 1, ?3)
            ON CONFLICT (session_id, name) DO UPDATE SET version = version + 1, document = excluded.document,
                updated_at = CURRENT_TIMESTAMP
            RETURNING version`,
		del:    `DELETE FROM ` + t + one,
		delAt:  `DELETE FROM ` + t + one + ` AND version = ?3`,
		remove: `DELETE FROM ` + t + ` WHERE session_id = ?1`,
	}
}

// checkpointsReady reports whether the checkpoints table exists, looking
// it up until it does (another Store, or a migration, may create it while
// this one is open).
func (st *Store) checkpointsReady(ctx context.Context) (bool, error) {
	if st.ckReady.Load() {
		return true, nil
	}
	ok, err := tableExists(ctx, st.db, st.q.ck.table)
	if ok {
		st.ckReady.Store(true)
	}
	return ok, err
}

// tableExists reports whether table name exists, as SQLite matches names
// (case-insensitively).
func tableExists(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND lower(name) = lower(?1)`, name).Scan(&n)
	return n > 0, err
}

// ensureCheckpoints makes sure, inside a write transaction, that the
// checkpoints table exists: it creates it if missing, or, with
// SkipCreateTables, fails with ErrNoSchema. create false only looks: a
// delete needs no table to delete nothing. ran reports whether a CREATE
// ran (the transaction may have changed); exists whether the table is
// there now.
func (st *Store) ensureCheckpoints(ctx context.Context, w *wconn, create bool) (exists, ran bool, err error) {
	if st.ckReady.Load() {
		return true, false, nil
	}
	// Not ready: look in the transaction (ckReady is set only once a
	// commit made sure; another request of this group may have created
	// the table and may yet roll back).
	exists, err = tableExists(ctx, w.c, st.q.ck.table)
	if err != nil || exists || !create {
		return exists, false, err
	}
	if st.opts.SkipCreateTables {
		return false, false, fmt.Errorf("%w: no table %q for checkpoints (Options.SkipCreateTables: create it as Options.CheckpointsTable documents)", ErrNoSchema, st.q.ck.table)
	}
	if err := w.execOnce(ctx, st.q.ck.create); err != nil {
		return false, false, err
	}
	return true, true, nil
}

// LoadCheckpoint returns the document stored under name and its version;
// an error wrapping session.ErrNoCheckpoint when there is none.
func (s *Session) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	if err := validCheckpointName(name); err != nil {
		return nil, 0, err
	}
	if err := s.st.check(ctx); err != nil {
		return nil, 0, err
	}
	op := s.ckOp("load", name)
	ok, err := s.st.checkpointsReady(ctx)
	if err != nil {
		return nil, 0, s.st.wrap(ctx, op, err)
	}
	if !ok {
		return nil, 0, fmt.Errorf("sqlite: %s: %w", op, session.ErrNoCheckpoint)
	}
	var (
		doc     []byte
		version int64
	)
	err = s.st.db.QueryRowContext(ctx, s.st.q.ck.load, s.id, name).Scan(&doc, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("sqlite: %s: %w", op, session.ErrNoCheckpoint)
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
// new version. Otherwise it returns an error wrapping
// session.ErrCheckpointConflict and writes nothing. It is a write of the
// Store's writer, committed with the writes queued beside it.
func (s *Session) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	return s.AppendWithCheckpoint(ctx, nil, name, doc, version)
}

// AppendWithCheckpoint appends items as one batch, exactly as AddItems
// does, and saves doc under name, as SaveCheckpoint does, in one
// transaction of the Store's writer: the checkpoint statement runs first,
// and if the version is not the stored one, nothing is written and the
// error wraps session.ErrCheckpointConflict. An empty batch only saves the
// checkpoint.
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
	var next int64
	err := s.st.submit(ctx, false, func(ctx context.Context, w *wconn, _ bool) error {
		_, created, err := s.st.ensureCheckpoints(ctx, w, true)
		if err != nil {
			return err
		}
		var ok bool
		next, ok, err = s.saveCheckpoint(ctx, w, name, doc, version)
		if err != nil {
			return err
		}
		if !ok {
			cerr := s.conflict(ctx, w, name, version)
			if created {
				return cerr // the transaction holds a CREATE: roll it back
			}
			return untouched(cerr)
		}
		if len(items) == 0 {
			return nil
		}
		return s.insert(ctx, w, items)
	})
	if err != nil {
		op := s.ckOp("save", name)
		if len(items) > 0 {
			op = fmt.Sprintf("append %d items with checkpoint %q of session %q", len(items), name, s.id)
		}
		return 0, s.st.wrap(ctx, op, err)
	}
	s.st.ckReady.Store(true)
	return next, nil
}

// saveCheckpoint runs the checkpoint statement for version in the write
// transaction on w. ok == false: the stored version is not version, and
// nothing was written.
func (s *Session) saveCheckpoint(ctx context.Context, w *wconn, name string, doc []byte, version int64) (next int64, ok bool, err error) {
	q := &s.st.q.ck
	switch {
	case version == session.AnyVersion:
		stmt, err := w.stmt(ctx, q.upsert)
		if err != nil {
			return 0, false, err
		}
		if err := stmt.QueryRowContext(ctx, s.id, name, doc).Scan(&next); err != nil {
			return 0, false, err
		}
		return next, true, nil
	case version == 0:
		n, err := w.execCount(ctx, q.insert, s.id, name, doc)
		return 1, n == 1, err
	case version > 0:
		n, err := w.execCount(ctx, q.update, s.id, name, doc, version)
		return version + 1, n == 1, err
	}
	return 0, false, nil // no checkpoint is ever at a negative version
}

// execCount runs query through its prepared statement and returns the
// rows it changed.
func (w *wconn) execCount(ctx context.Context, query string, args ...any) (int64, error) {
	stmt, err := w.stmt(ctx, query)
	if err != nil {
		return 0, err
	}
	res, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// conflict returns the error of a version check that failed: the
// checkpoint is at another version than the one given. It names the
// stored version, read in the same transaction (0: none).
func (s *Session) conflict(ctx context.Context, w *wconn, name string, version int64) error {
	var stored int64
	if err := w.c.QueryRowContext(ctx, s.st.q.ck.version, s.id, name).Scan(&stored); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: the stored version is not %d (reading it: %v)", session.ErrCheckpointConflict, version, err)
	}
	return fmt.Errorf("%w: the stored version is %d, not %d", session.ErrCheckpointConflict, stored, version)
}

// DeleteCheckpoint removes the checkpoint under name if its stored version
// is version (session.AnyVersion: whatever it is), and otherwise returns
// an error wrapping session.ErrCheckpointConflict. Deleting a checkpoint
// that is not there succeeds for version 0 and AnyVersion.
func (s *Session) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	if err := validCheckpointName(name); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	q := &s.st.q.ck
	return s.st.writeW(ctx, s.ckOp("delete", name), false, func(ctx context.Context, w *wconn, _ bool) error {
		exists, _, err := s.st.ensureCheckpoints(ctx, w, false)
		if err != nil {
			return err
		}
		if !exists {
			if version == 0 || version == session.AnyVersion {
				return nil
			}
			return untouched(fmt.Errorf("%w: the stored version is 0, not %d", session.ErrCheckpointConflict, version))
		}
		if version == session.AnyVersion {
			return w.exec(ctx, q.del, s.id, name)
		}
		n, err := w.execCount(ctx, q.delAt, s.id, name, version)
		if err != nil || n == 1 {
			return err
		}
		var stored int64
		err = w.c.QueryRowContext(ctx, q.version, s.id, name).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			if version == 0 {
				return nil // not there, as version 0 says
			}
			err = nil
		}
		if err != nil {
			return err
		}
		return untouched(fmt.Errorf("%w: the stored version is %d, not %d", session.ErrCheckpointConflict, stored, version))
	})
}

// ListCheckpoints returns the names of the session's checkpoints, sorted.
func (s *Session) ListCheckpoints(ctx context.Context) ([]string, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	op := fmt.Sprintf("list the checkpoints of session %q", s.id)
	names := []string{}
	ok, err := s.st.checkpointsReady(ctx)
	if err != nil || !ok {
		return names, s.st.wrap(ctx, op, err)
	}
	rows, err := s.st.db.QueryContext(ctx, s.st.q.ck.list, s.id)
	if err != nil {
		return nil, s.st.wrap(ctx, op, err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, s.st.wrap(ctx, op, err)
		}
		names = append(names, n)
	}
	if err := closeRows(rows); err != nil {
		return nil, s.st.wrap(ctx, op, err)
	}
	sort.Strings(names) // SQLite's BINARY order is bytewise already; this is the contract's
	return names, nil
}

// ckOp names a checkpoint operation in errors: never the document.
func (s *Session) ckOp(verb, name string) string {
	return fmt.Sprintf("%s checkpoint %q of session %q", verb, name, s.id)
}

// RemoveSession deletes everything the Store holds for session id, in one
// transaction: its items, its session row, and its checkpoints and
// operation ids (which Clear keeps). It is conformance.Remover's method, so that a check leaves
// no trace. On an AdvancedSQLiteSession store it clears every branch as
// Clear does; the class's branch reservations and clear generation of the
// session stay, as the class keeps them, so that no instance of it still
// pointing at a branch reuses or writes into one.
func (st *Store) RemoveSession(ctx context.Context, id string) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	return st.writeW(ctx, fmt.Sprintf("remove session %q", id), false, func(ctx context.Context, w *wconn, _ bool) error {
		if err := s.clear(ctx, w); err != nil {
			return err
		}
		ops, err := st.opsExist(ctx, w.c)
		if err != nil {
			return err
		}
		if ops {
			if err := w.exec(ctx, st.q.ops.remove, id); err != nil {
				return err
			}
		}
		exists, _, err := st.ensureCheckpoints(ctx, w, false)
		if err != nil || !exists {
			return err
		}
		return w.exec(ctx, st.q.ck.remove, id)
	})
}

// validCheckpoint refuses an empty name or document.
func validCheckpoint(name string, doc []byte) error {
	if err := driver.ValidateCheckpoint(name, doc); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return nil
}

func validCheckpointName(name string) error {
	if err := driver.ValidateCheckpointName(name); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return nil
}
