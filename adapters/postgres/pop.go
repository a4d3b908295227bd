package postgres

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsessions/sessions/session"
)

// PopItem removes and returns the newest item, in one transaction. An
// empty session gives ok == false.
//
// The common case is two round trips: BEGIN, the session row's lock and
// DELETE ... RETURNING of the newest row go in one pipeline, then COMMIT
// once Go has decoded the row. A corrupt newest row is never deleted: the
// transaction rolls back, and a second one walks down from the newest row,
// under the same locks, to the newest valid item and deletes only that;
// the corrupt rows above it stay where they are and are reported. Pops of
// one session, from any number of processes, queue on the session row's
// lock, so each removes a different item, the newest at the time it runs.
// A pop racing a writer that does not take that lock (Python's) retries
// when the row it aimed at was deleted under it.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.st.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	c, err := s.st.pool.Acquire(ctx)
	if err != nil {
		return session.Item{}, false, s.st.wrap(ctx, "pop item", err)
	}
	defer c.Release()
	var d decoder
	item, ok, err := s.popFast(ctx, c, &d)
	if errors.Is(err, errCorruptNewest) {
		d = decoder{newestFirst: true}
		item, ok, err = s.popSlow(ctx, c, &d)
	}
	if err != nil {
		rollback(ctx, c)
		return session.Item{}, false, s.st.wrap(ctx, "pop item", err)
	}
	d.report(ctx, s)
	return item, ok, nil
}

// errCorruptNewest sends PopItem to its slow path.
var errCorruptNewest = errors.New("the newest row is corrupt")

// popFast deletes the newest row and commits if it decodes. It returns
// errCorruptNewest, with the transaction rolled back, if it does not.
func (s *Session) popFast(ctx context.Context, c *pgxpool.Conn, d *decoder) (session.Item, bool, error) {
	q := s.st.q
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(q.lockSession, s.sid)
	b.Queue(q.pop, s.sid)
	br := c.SendBatch(ctx, &b)
	_, err := br.Exec()
	if err == nil {
		_, err = br.Exec()
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = d.scanAll(rows, 1)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return session.Item{}, false, err
	}
	for d.read == 0 {
		// Nothing deleted: an empty session, or a writer that does not
		// lock the session row (Python's pop) took the row this DELETE
		// aimed at. Each statement sees what committed before it.
		var more bool
		if err := c.QueryRow(ctx, q.exists, s.sid).Scan(&more); err != nil {
			return session.Item{}, false, err
		}
		if !more {
			return session.Item{}, false, commit(ctx, c)
		}
		rows, err := c.Query(ctx, q.pop, s.sid)
		if err != nil {
			return session.Item{}, false, err
		}
		if err := d.scanAll(rows, 1); err != nil {
			return session.Item{}, false, err
		}
	}
	if len(d.items) == 0 {
		d.corrupt = nil // reported by the slow path, which reads it again
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			return session.Item{}, false, err
		}
		return session.Item{}, false, errCorruptNewest
	}
	return d.items[0], true, commit(ctx, c)
}

// popSlow deletes the newest valid row, leaving the corrupt rows above it
// in place (in d.corrupt, for reporting): in one transaction holding the
// session row's lock, it reads down from the newest row in windows that
// double, locking what it reads, then deletes the first valid row by id.
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
	below, size := int64(math.MaxInt64), int64(4)
	for {
		d.read = 0
		rows, err := c.Query(ctx, q.latestLocked, s.sid, below, size)
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
			return session.Item{}, false, commit(ctx, c) // only corrupt rows
		}
		below, size = d.lastID, min(size, math.MaxInt64/2)*2
	}
	// The row is locked: no one else can delete it before this does.
	tag, err := c.Exec(ctx, q.deleteID, d.lastID, s.sid)
	if err != nil {
		return session.Item{}, false, err
	}
	if tag.RowsAffected() != 1 {
		return session.Item{}, false, errors.New("the locked row to pop was not deleted")
	}
	return d.items[0], true, commit(ctx, c)
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
