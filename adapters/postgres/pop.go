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
// The common case is two statements in one implicit transaction, one
// round trip: the first takes the session's advisory lock and then locks
// the session row FOR UPDATE, as every write of this package does (and as
// a Python insert's foreign key check waits for); the second, whose
// snapshot is taken with the locks held, deletes the session's newest row
// if PostgreSQL's JSON parser (strict RFC 8259, as this module's validator
// is) reads it as an object within the validator's depth limit, and
// returns it. So the item popped is the newest when the pop takes effect.
// When it deletes nothing, a session that had no session row when the
// locks were taken was empty then; a session with one is empty if a read
// right after the pop finds no rows (a second round trip). Everything
// else, a race lost to Python's pop (which takes no session lock) or a
// corrupt newest row, goes to one transaction that takes the session
// row's lock, reads down from the newest row to the newest valid one, and
// deletes that one by id; if Python's pop took that row first, it reads
// again.
//
// An error wrapping session.ErrOutcomeUnknown means an item may have been
// removed: the commit had been sent.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.st.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	if !s.st.noFastPop {
		item, ok, err := s.popFast(ctx)
		if !errors.Is(err, errTrySlow) {
			return item, ok, s.st.wrap(ctx, "pop item", sent(err))
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

// popFast runs popLock and popObject in one implicit transaction. It
// returns ok == false and no error for an empty session, and errTrySlow
// when it deleted nothing from a session that has rows, or when the server
// refused the statement (a row that is not JSON fails the cast): nothing
// was deleted then either.
func (s *Session) popFast(ctx context.Context) (session.Item, bool, error) {
	c, err := s.st.pool.Acquire(ctx)
	if err != nil {
		return session.Item{}, false, err
	}
	defer c.Release()
	var d decoder
	d.dec.Expect(1)
	noSession := false
	var b pgx.Batch
	b.Queue(s.st.q.popLock, s.sid)
	b.Queue(s.st.q.popObject, s.sid)
	br := c.SendBatch(ctx, &b)
	rows, err := br.Query()
	if err == nil {
		if rows.Next() {
			noSession = rows.RawValues()[0] == nil
		}
		rows.Close()
		err = rows.Err()
	}
	if err == nil {
		rows, err = br.Query()
		if err == nil {
			if rows.Next() {
				err = d.scan(rows)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Severity == "ERROR":
		return session.Item{}, false, errTrySlow
	case err != nil:
		return session.Item{}, false, err
	case d.read == 0 && noSession:
		// No session row when the locks were taken, so no rows (the
		// foreign key): the session was empty then, and nothing was
		// deleted.
		return session.Item{}, false, nil
	case d.read == 0:
		// Nothing deleted from a session with a row: it is empty, or its
		// newest row is not an object, or Python's pop took it first. A
		// session without rows in a snapshot taken after the pop's commit
		// (which deleted nothing) was empty then.
		var has bool
		if err := c.QueryRow(ctx, s.st.q.hasRows, s.sid).Scan(&has); err != nil || has {
			return session.Item{}, false, errTrySlow
		}
		return session.Item{}, false, nil
	case len(d.items) == 1:
		return d.items[0], true, nil
	}
	// PostgreSQL read an object where Go reads none: the parsers disagree
	// (which they should not). Put the row back as it was, under its id,
	// and let the slow path decide.
	r := d.corrupt[0]
	if _, err := s.st.pool.Exec(ctx, s.st.q.restore, d.lastID, s.sid, string(r.Raw), d.lastAt); err != nil {
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
	b.Queue(q.lockKey, s.sid)
	b.Queue(q.lockSession, s.sid)
	br := c.SendBatch(ctx, &b)
	var err error
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Item{}, false, err
	}
	for {
		*d = decoder{newestFirst: true, lastAt: "infinity", lastID: math.MaxInt64}
		size := int64(4)
		for {
			d.read = 0
			rows, err := c.Query(ctx, q.latest, s.sid, d.lastAt, d.lastID, size)
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
			size = min(size, math.MaxInt64/2) * 2
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

// commit commits the transaction on c. If ctx ended before, it commits
// nothing and returns ctx's error (the caller rolls back); an error once
// COMMIT was sent wraps session.ErrOutcomeUnknown unless PostgreSQL
// reported it (the transaction rolled back).
func commit(ctx context.Context, c *pgxpool.Conn) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := c.Exec(ctx, "COMMIT")
	return sent(err)
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
