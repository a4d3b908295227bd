package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"strings"
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
	if err == nil {
		return false
	}
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

// isNoTransaction reports the error of a ROLLBACK after SQLite already
// ended the transaction itself (an interrupted or failed statement can).
func isNoTransaction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no transaction is active")
}

// rollback ends the read transaction on c. If that fails while a
// transaction may still be open, c is discarded from the pool so that no
// later call inherits it, as Python evicts a connection that cannot roll
// back. An in-memory database cannot lose its only connection: the Store
// stops taking calls instead (they fail with ErrClosed; Close still closes
// it).
func (st *Store) rollback(ctx context.Context, c *sql.Conn) {
	_, err := c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	if err == nil || isNoTransaction(err) {
		return
	}
	if st.memory {
		st.closed.Store(true)
		return
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
}

// newestWindows reads the newest n readable items into d in one read
// transaction, so that every window is one snapshot: window reads at most
// size rows below the row id below and returns how many it read; each
// next window starts below the oldest row seen and is twice as large.
func (st *Store) newestWindows(ctx context.Context, d *decoder, n int, window func(c *sql.Conn, below, size int64) (int64, error)) error {
	c, err := st.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer func() {
		if _, err := c.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
			st.rollback(ctx, c)
		}
	}()
	below, size := int64(math.MaxInt64), int64(n)
	for {
		got, err := window(c, below, size)
		if err != nil || len(d.items) >= n || got < size {
			return err
		}
		below, size = d.lastID, double(size)
	}
}
