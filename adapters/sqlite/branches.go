package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Branches of an AdvancedSQLiteSession store.

var (
	// ErrBranchNotFound reports a branch the session has no row on
	// (SwitchBranch, DeleteBranch), as the class's "Branch ... does not
	// exist".
	ErrBranchNotFound = errors.New("sqlite: branch does not exist")
	// ErrBranchUsed reports a branch id the session used before
	// (CreateBranchFromTurn): the class reserves every id for good, so
	// that an instance still pointing at a deleted branch never writes
	// into a new one of the same name.
	ErrBranchUsed = errors.New("sqlite: branch id has already been used")
	// ErrTurnNotFound reports a turn number with no user message on the
	// current branch (CreateBranchFromTurn).
	ErrTurnNotFound = errors.New("sqlite: turn does not contain a user message")
	// ErrBranchProtected reports a DeleteBranch the class refuses: an
	// empty id, MainBranch, or the current branch without force.
	ErrBranchProtected = errors.New("sqlite: branch cannot be deleted")
)

// Branch describes one branch of a session, as the class's list_branches
// does.
type Branch struct {
	ID           string
	MessageCount int64     // structure rows of the branch
	UserTurns    int64     // its user messages
	Current      bool      // the handle's current branch
	CreatedAt    time.Time // its oldest structure row's created_at (UTC, to the second)
}

// refusal is a refusal a write function decided (ErrBranchNotFound and
// the like): the caller gets it as it is, not wrapped in the write's
// "sqlite: <operation>: " (refused).
type refusal struct{ err error }

// refuse records err as the refusal and returns it.
func (r *refusal) refuse(err error) error {
	r.err = err
	return err
}

// refused returns the refusal if err is it, else err.
func (r *refusal) refused(err error) error {
	if r.err != nil && errors.Is(err, r.err) {
		return r.err
	}
	return err
}

// requireAdvanced fails a branch, turn or usage call on a store that is
// not an AdvancedSQLiteSession store.
func (s *Session) requireAdvanced(ctx context.Context) error {
	if err := s.st.check(ctx); err != nil {
		return err
	}
	if !s.st.isAdvanced() {
		if ok, err := s.st.detectAdvanced(ctx); err != nil {
			return s.st.wrap(ctx, "read the schema", err)
		} else if !ok {
			return ErrNotAdvanced
		}
		s.st.advancedSeen.Store(true) // the class made it one since the last write
	}
	return nil
}

// branchItems is Items on the current branch: the class's get_items.
func (s *Session) branchItems(ctx context.Context) ([]session.Item, error) {
	branch, err := s.readBranch(ctx)
	if err != nil {
		return nil, s.st.wrap(ctx, "items", err)
	}
	var d decoder
	rows, err := s.st.db.QueryContext(ctx, s.st.aq.items, s.id, branch)
	if err := scanRows(rows, err, &d); err != nil {
		return nil, s.st.wrap(ctx, "items", err)
	}
	d.report(ctx, s)
	return d.all(), nil
}

// branchLatest is latest on the current branch: the newest n readable
// items into d, newest first, reading below the oldest row seen in windows
// twice as large each time, in one read transaction.
func (s *Session) branchLatest(ctx context.Context, n int, d *decoder) error {
	branch, err := s.readBranch(ctx)
	if err != nil {
		return err
	}
	return s.st.newestWindows(ctx, d, n, func(c *sql.Conn, below, size int64) (int64, error) {
		rows, err := c.QueryContext(ctx, s.st.aq.latest, s.id, branch, below, size)
		if err != nil {
			return 0, err
		}
		var read int64
		for len(d.items) < n && rows.Next() {
			if err := d.scan(rows); err != nil {
				rows.Close()
				return read, err
			}
			read++
		}
		return read, closeRows(rows)
	})
}

// SwitchBranch makes branch the handle's current branch, as the class's
// switch_to_branch does: the branch must have a row in the session
// (ErrBranchNotFound otherwise). The handle's reads and writes go to it
// until it switches again, creates a branch, or sees a Clear.
func (s *Session) SwitchBranch(ctx context.Context, branch string) error {
	if err := s.requireAdvanced(ctx); err != nil {
		return err
	}
	if s.st.opts.ReadOnly {
		return s.switchReadOnly(ctx, branch)
	}
	var (
		gen int64
		r   refusal
	)
	err := s.st.writeW(ctx, fmt.Sprintf("switch session %q to branch %q", s.id, branch), false, func(ctx context.Context, w *wconn, _ bool) error {
		q := &s.st.aq
		if err := w.exec(ctx, q.ensureGen); err != nil {
			return err
		}
		if err := w.exec(ctx, q.initGen, s.id); err != nil {
			return err
		}
		var n int64
		if err := w.c.QueryRowContext(ctx, q.countBranch, s.id, branch).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return r.refuse(fmt.Errorf("%w: %q in session %q", ErrBranchNotFound, branch, s.id))
		}
		return w.c.QueryRowContext(ctx, q.readGen, s.id).Scan(&gen)
	})
	if err != nil {
		return r.refused(err)
	}
	return s.commitPointer(ctx, branch, gen)
}

// switchReadOnly is SwitchBranch on a read-only Store: the same check,
// without the clear-generation row the class creates if missing (a
// session without one was never cleared).
func (s *Session) switchReadOnly(ctx context.Context, branch string) error {
	var n int64
	if err := s.st.db.QueryRowContext(ctx, s.st.aq.countBranch, s.id, branch).Scan(&n); err != nil {
		return s.st.wrap(ctx, "switch branch", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q in session %q", ErrBranchNotFound, branch, s.id)
	}
	var gen int64
	err := s.st.db.QueryRowContext(ctx, s.st.aq.readGen, s.id).Scan(&gen)
	if err != nil && !errors.Is(err, sql.ErrNoRows) && !isNoSuchTable(err) {
		return s.st.wrap(ctx, "switch branch", err)
	}
	s.br.set(branch, gen)
	return nil
}

// commitPointer is the class's _commit_branch_pointer: the handle points
// at branch unless a clear committed since gen was read, in which case it
// points at MainBranch.
func (s *Session) commitPointer(ctx context.Context, branch string, gen int64) error {
	var now int64
	err := s.st.db.QueryRowContext(ctx, s.st.aq.readGen, s.id).Scan(&now)
	if err != nil && !errors.Is(err, sql.ErrNoRows) && !isNoSuchTable(err) {
		return s.st.wrap(ctx, "read the clear generation", err)
	}
	if now != gen {
		s.br.set(MainBranch, now)
		return nil
	}
	s.br.set(branch, gen)
	return nil
}

// CreateBranchFromTurn creates a branch holding the current branch's
// history before user turn turn (its branch turn number, as Turns lists
// it) and makes it the handle's current branch, as the class's
// create_branch_from_turn does: the new branch's structure rows point at
// the same message rows, with new sequence numbers and the same turn
// numbers; the next AddItems on it starts turn turn again. name "" asks
// for the class's generated name, branch_from_turn_<turn>_<unix seconds>
// (with _2, _3, ... if taken). It returns the branch id.
//
// The turn must hold a user message on the current branch
// (ErrTurnNotFound), and name must never have been a branch of the
// session (ErrBranchUsed).
func (s *Session) CreateBranchFromTurn(ctx context.Context, turn int64, name string) (string, error) {
	if err := s.requireAdvanced(ctx); err != nil {
		return "", err
	}
	var (
		branch string
		gen    int64
		r      refusal
	)
	err := s.st.writeW(ctx, fmt.Sprintf("branch session %q from turn %d", s.id, turn), false, func(ctx context.Context, w *wconn, _ bool) error {
		q := &s.st.aq
		if err := s.ensureReservations(ctx, w); err != nil {
			return err
		}
		source, g, err := s.syncWrite(ctx, w)
		if err != nil {
			return err
		}
		gen = g
		var data string
		switch err := w.c.QueryRowContext(ctx, q.turnUser, s.id, source, turn).Scan(&data); {
		case errors.Is(err, sql.ErrNoRows):
			return r.refuse(fmt.Errorf("%w: turn %d in branch %q of session %q", ErrTurnNotFound, turn, source, s.id))
		case err != nil:
			return err
		}
		if branch, err = s.reserveBranch(ctx, w, name, turn, &r); err != nil {
			return err
		}
		return s.copyBranch(ctx, w, source, branch, turn)
	})
	if err != nil {
		return "", r.refused(err)
	}
	return branch, s.commitPointer(ctx, branch, gen)
}

// reserveBranch is the class's _reserve_branch_id.
func (s *Session) reserveBranch(ctx context.Context, w *wconn, name string, turn int64, r *refusal) (string, error) {
	q := &s.st.aq
	if name != "" {
		n, err := w.execCount(ctx, q.reserve, s.id, name)
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", r.refuse(fmt.Errorf("%w: %q in session %q; choose a new branch id", ErrBranchUsed, name, s.id))
		}
		return name, nil
	}
	base := "branch_from_turn_" + strconv.FormatInt(turn, 10) + "_" + strconv.FormatInt(time.Now().Unix(), 10)
	id := base
	for suffix := 1; ; {
		n, err := w.execCount(ctx, q.reserve, s.id, id)
		if err != nil {
			return "", err
		}
		if n == 1 {
			return id, nil
		}
		suffix++
		id = base + "_" + strconv.Itoa(suffix)
	}
}

// copyBranch copies the structure rows of source before branch turn turn
// to branch, with the session's next sequence numbers.
func (s *Session) copyBranch(ctx context.Context, w *wconn, source, branch string, turn int64) error {
	q := &s.st.aq
	type row struct {
		msgID, seq           int64
		typ                  string
		userTurn, branchTurn sql.NullInt64
		tool                 sql.NullString
	}
	rows, err := w.c.QueryContext(ctx, q.copyRows, s.id, source, turn)
	if err != nil {
		return err
	}
	var copies []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.msgID, &r.typ, &r.seq, &r.userTurn, &r.branchTurn, &r.tool); err != nil {
			rows.Close()
			return err
		}
		copies = append(copies, r)
	}
	if err := closeRows(rows); err != nil || len(copies) == 0 {
		return err
	}
	var seq int64
	if err := w.c.QueryRowContext(ctx, q.maxSeq, s.id).Scan(&seq); err != nil {
		return err
	}
	for i, r := range copies {
		if err := w.exec(ctx, q.insertStructure, s.id, r.msgID, branch, r.typ, seq+int64(i)+1, r.userTurn, r.branchTurn, r.tool); err != nil {
			return err
		}
	}
	return nil
}

// DeleteBranch deletes a branch of the session, as the class's
// delete_branch does: its structure and usage rows, and the message rows
// no other branch shares. Its id stays reserved. MainBranch, an empty id,
// and the current branch without force are refused (ErrBranchProtected);
// with force, the handle first switches to MainBranch. A branch without
// rows is ErrBranchNotFound.
func (s *Session) DeleteBranch(ctx context.Context, branch string, force bool) error {
	if err := s.requireAdvanced(ctx); err != nil {
		return err
	}
	branch = strings.TrimSpace(branch)
	switch {
	case branch == "":
		return fmt.Errorf("%w: empty branch id", ErrBranchProtected)
	case branch == MainBranch:
		return fmt.Errorf("%w: %q is the main branch", ErrBranchProtected, branch)
	case branch == s.CurrentBranch():
		if !force {
			return fmt.Errorf("%w: %q is the current branch; switch branches first, or force", ErrBranchProtected, branch)
		}
		if err := s.SwitchBranch(ctx, MainBranch); err != nil {
			return err
		}
	}
	var r refusal
	return r.refused(s.st.writeW(ctx, fmt.Sprintf("delete branch %q of session %q", branch, s.id), false, func(ctx context.Context, w *wconn, _ bool) error {
		if err := s.ensureReservations(ctx, w); err != nil {
			return err
		}
		var n int64
		if err := w.c.QueryRowContext(ctx, s.st.aq.countBranch, s.id, branch).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return r.refuse(fmt.Errorf("%w: %q in session %q", ErrBranchNotFound, branch, s.id))
		}
		return s.dropBranchRows(ctx, w, branch)
	}))
}

// ListBranches lists the session's branches, oldest first, as the class's
// list_branches does.
func (s *Session) ListBranches(ctx context.Context) ([]Branch, error) {
	if err := s.requireAdvanced(ctx); err != nil {
		return nil, err
	}
	current, err := s.readBranch(ctx)
	if err != nil {
		return nil, s.st.wrap(ctx, "list branches", err)
	}
	rows, err := s.st.db.QueryContext(ctx, s.st.aq.listBranches, s.id)
	if err != nil {
		return nil, s.st.wrap(ctx, "list branches", err)
	}
	var out []Branch
	for rows.Next() {
		var b Branch
		var created sql.NullString
		if err := rows.Scan(&b.ID, &b.MessageCount, &b.UserTurns, &created); err != nil {
			rows.Close()
			return nil, s.st.wrap(ctx, "list branches", err)
		}
		b.Current = b.ID == current
		b.CreatedAt = parseSQLiteTime(created.String)
		out = append(out, b)
	}
	return out, s.st.wrap(ctx, "list branches", closeRows(rows))
}

// parseSQLiteTime reads a CURRENT_TIMESTAMP text; the zero time for
// anything else.
func parseSQLiteTime(s string) time.Time {
	t, err := time.ParseInLocation(sqliteTime, s, time.UTC)
	if err != nil {
		return time.Time{}
	}
	return t
}
