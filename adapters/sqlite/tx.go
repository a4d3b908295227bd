package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"strings"
	"time"
)

// SQLite result codes this package reacts to (https://sqlite.org/rescode.html).
const (
	codeBusy   = 5
	codeLocked = 6
	codeTooBig = 18
)

// sqliteCode returns the primary SQLite result code of err, when the
// driver exposes one (modernc.org/sqlite's *Error has Code() int).
func sqliteCode(err error) (int, bool) {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code() & 0xff, true
	}
	return 0, false
}

// isBusy reports whether err says another connection holds the lock.
func isBusy(err error) bool {
	if code, ok := sqliteCode(err); ok {
		return code == codeBusy || code == codeLocked
	}
	// A driver without result codes: match SQLite's own messages.
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
}

func isTooBig(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code == codeTooBig
}

// beforeCommit marks an error that happened before COMMIT was sent, after
// which the transaction was rolled back: a retry cannot write twice.
type beforeCommit struct{ err error }

func (e *beforeCommit) Error() string { return e.err.Error() }
func (e *beforeCommit) Unwrap() error { return e.err }

// write runs fn in one write transaction (BEGIN IMMEDIATE ... COMMIT) on a
// connection of its own. A busy database is retried with jittered
// exponential backoff while the error came before COMMIT (so the
// transaction rolled back and nothing was written) and BusyTimeout has not
// passed. COMMIT runs even if ctx ends meanwhile: once every statement
// succeeded, the outcome the caller gets is the commit's, never a guess.
func (st *Store) write(ctx context.Context, op string, fn func(ctx context.Context, c *sql.Conn) error) error {
	if err := st.check(ctx); err != nil {
		return err
	}
	select {
	case st.writers <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-st.writers }()

	start := time.Now()
	backoff := time.Millisecond
	for {
		err := st.writeOnce(ctx, fn)
		var bc *beforeCommit
		if err == nil || !errors.As(err, &bc) || !isBusy(err) || ctx.Err() != nil ||
			time.Since(start)+backoff > st.opts.BusyTimeout {
			return st.wrap(ctx, op, err)
		}
		sleep := backoff/2 + rand.N(backoff/2+1) // jitter in [backoff/2, backoff]
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return st.wrap(ctx, op, err)
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (st *Store) writeOnce(ctx context.Context, fn func(ctx context.Context, c *sql.Conn) error) error {
	c, err := st.db.Conn(ctx)
	if err != nil {
		return &beforeCommit{err}
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		// A failed BEGIN leaves no transaction behind.
		return &beforeCommit{err}
	}
	if err := fn(ctx, c); err != nil {
		st.rollback(ctx, c)
		return &beforeCommit{err}
	}
	if _, err := c.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
		// The transaction may still be open (SQLITE_BUSY leaves it so):
		// end it, but report the failure as is; it is never retried.
		st.rollback(ctx, c)
		return err
	}
	return nil
}

// rollback ends the transaction on c. If that fails while a transaction
// may still be open, c is discarded from the pool so that no later call
// inherits it, as Python evicts a connection that cannot roll back. An
// in-memory database cannot lose its only connection: the Store stops
// taking calls instead (they fail with ErrClosed; Close still closes it).
func (st *Store) rollback(ctx context.Context, c *sql.Conn) {
	_, err := c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	if err == nil || strings.Contains(err.Error(), "no transaction is active") {
		// SQLite already rolled back (an interrupted or failed statement
		// does so on its own).
		return
	}
	if st.memory {
		st.closed.Store(true)
		return
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
}
