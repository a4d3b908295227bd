package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsessions/sessions/session"
)

// PopItem removes and returns the newest item. An empty session gives
// ok == false. A corrupt row is never deleted: pops go past corrupt rows
// at the top, which stay and are reported.
//
// The common case is one statement, one round trip, in autocommit: it
// deletes the session's newest row if PostgreSQL's JSON parser (strict
// RFC 8259, as this module's validator is) reads it as an object within
// the validator's depth limit, and returns it, or says the session is
// empty. Concurrent pops of one row
// queue on its row lock; the one that finds it gone deletes nothing.
// Everything else, a lost race or a corrupt newest row, goes to one
// transaction that takes the session row's lock (so no
// append, replace or clear of this package runs beside it), reads down
// from the newest row to the newest valid one, and deletes that one by
// id; if a one-statement pop or Python's took that row first, it reads
// again.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.st.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	if !s.st.noFastPop {
		item, ok, err := s.popFast(ctx)
		if !errors.Is(err, errTrySlow) {
			return item, ok, s.st.wrap(ctx, "pop item", err)
		}
	}
	c, err := s.st.pool.Acquire(ctx)
	if err != nil {
		return session.Item{}, false, s.st.wrap(ctx, "pop item", err)
	}
	defer c.Release()
	d := decoder{newestFirst: true}
	item, ok, err := s.popSlow(ctx, c, &d)
	if err != nil {
		rollback(ctx, c)
		return session.Item{}, false, s.st.wrap(ctx, "pop item", err)
	}
	d.report(ctx, s)
	return item, ok, nil
}

// errTrySlow sends PopItem to its transaction.
var errTrySlow = errors.New("pop: take the slow path")

// popFast runs popObject. It returns ok == false and no error for an
// empty session, and errTrySlow when it deleted nothing from a session
// that has rows, or when the server refused the statement (a row that is
// not JSON fails the cast): nothing was deleted then either.
func (s *Session) popFast(ctx context.Context) (session.Item, bool, error) {
	var d decoder
	empty := false
	rows, err := s.st.pool.Query(ctx, s.st.q.popObject, s.sid)
	if err == nil {
		if rows.Next() {
			if rows.RawValues()[0] == nil {
				empty = true
			} else {
				err = d.scan(rows)
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return session.Item{}, false, errTrySlow
	case err != nil:
		return session.Item{}, false, err
	case empty:
		return session.Item{}, false, nil
	case d.read == 0:
		return session.Item{}, false, errTrySlow
	case len(d.items) == 1:
		return d.items[0], true, nil
	}
	// PostgreSQL read an object where Go reads none: the parsers disagree
	// (which they should not). Put the row back as it was, under its id,
	// and let the slow path decide.
	r := d.corrupt[0]
	if _, err := s.st.pool.Exec(ctx, s.st.q.restore, d.lastID, s.sid, string(r.Raw)); err != nil {
		r.SessionID = s.id
		r.Err = fmt.Errorf("%w; it was deleted by a pop and could not be restored (%v): the raw bytes are here", r.Err, err)
		s.st.opts.OnCorrupt.Report(ctx, r)
		return session.Item{}, false, err
	}
	return session.Item{}, false, errTrySlow
}

// popSlow deletes the newest valid row in one transaction holding the
// session row's lock, leaving the corrupt rows above it in place (in
// d.corrupt, for reporting). It reads down from the newest row in windows
// that double; if a writer that does not take the session lock (Python's
// pop) deleted the row first, it reads again.
func (s *Session) popSlow(ctx context.Context, c *pgxpool.Conn, d *decoder) (session.Item, bool, error) {
	q := s.st.q
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(q.lockSession, s.sid)
	br := c.SendBatch(ctx, &b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Item{}, false, err
	}
	for {
		*d = decoder{newestFirst: true}
		below, size := int64(math.MaxInt64), int64(4)
		for {
			d.read = 0
			rows, err := c.Query(ctx, q.latest, s.sid, below, size)
			if err != nil {
				return session.Item{}, false, err
			}
			if err := d.scanAll(rows, 1); err != nil {
				return session.Item{}, false, err
			}
			if len(d.items) > 0 {
				break
			}
			if d.read < size {
				return session.Item{}, false, commit(ctx, c) // empty, or only corrupt rows
			}
			below, size = d.lastID, min(size, math.MaxInt64/2)*2
		}
		tag, err := c.Exec(ctx, q.deleteID, d.lastID, s.sid)
		if err != nil {
			return session.Item{}, false, err
		}
		if tag.RowsAffected() == 1 {
			return d.items[0], true, commit(ctx, c)
		}
	}
}

// commit ends the transaction on c, even if ctx ended meanwhile: once every
// statement succeeded, the caller gets the commit's outcome, never a guess.
func commit(ctx context.Context, c *pgxpool.Conn) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := c.Exec(ctx, "COMMIT")
	return err
}

// rollback ends any transaction left open on c. If that fails, the
// connection is closed, and the pool discards it on release (it discards
// any connection left inside a transaction, too).
func rollback(ctx context.Context, c *pgxpool.Conn) {
	if c.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Conn().Close(ctx)
	}
}
