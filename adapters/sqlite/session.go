package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Session is a handle on one session of a Store. It implements
// session.LatestReader and session.Replacer and is safe for concurrent use.
type Session struct {
	st *Store
	id string
}

var (
	_ session.LatestReader = (*Session)(nil)
	_ session.Replacer     = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// Items returns the whole history, oldest first. Corrupt rows are skipped
// and reported.
func (s *Session) Items(ctx context.Context) ([]session.Item, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	rows, err := s.st.db.QueryContext(ctx, s.st.q.items, s.id)
	if err != nil {
		return nil, s.st.wrap(ctx, "items", err)
	}
	var d decoder
	for rows.Next() {
		if err := d.scan(rows); err != nil {
			rows.Close()
			return nil, s.st.wrap(ctx, "items", err)
		}
	}
	if err := closeRows(rows); err != nil {
		return nil, s.st.wrap(ctx, "items", err)
	}
	d.report(ctx, s)
	if d.items == nil {
		return []session.Item{}, nil
	}
	return d.items, nil
}

// LatestItems returns the newest n items, oldest first. It reads the
// newest n rows through the (session_id, id) index in one statement; only
// when corrupt rows leave that window short of n items does it read on,
// below the oldest row seen, in windows twice as large each time. The cost
// follows n and the corrupt rows among the newest, never the length of the
// history, and no row is read twice unless the session changed meanwhile.
func (s *Session) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", session.ErrInvalidLimit, n)
	}
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	if n == 0 {
		return []session.Item{}, nil
	}
	d := decoder{newestFirst: true, items: make([]session.Item, 0, min(n, 256))}
	if err := s.latest(ctx, n, &d); err != nil {
		return nil, s.st.wrap(ctx, "latest items", err)
	}
	d.report(ctx, s)
	out := d.items
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// querier is what *sql.DB and *sql.Conn share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// window decodes the rows of the session below id below, newest first,
// until d holds n items; it returns the rows read and the newest row's id.
func (s *Session) window(ctx context.Context, q querier, d *decoder, n int, below, size int64) (read, newest int64, err error) {
	rows, err := q.QueryContext(ctx, s.st.q.latest, s.id, below, size)
	if err != nil {
		return 0, 0, err
	}
	for len(d.items) < n && rows.Next() {
		if err := d.scan(rows); err != nil {
			rows.Close()
			return 0, 0, err
		}
		if read++; read == 1 {
			newest = d.lastID
		}
	}
	return read, newest, closeRows(rows)
}

func (s *Session) latest(ctx context.Context, n int, d *decoder) error {
	// The first window is one statement: one snapshot, no transaction.
	read, newest, err := s.window(ctx, s.st.db, d, n, math.MaxInt64, int64(n))
	if err != nil || len(d.items) >= n || read < int64(n) {
		return err
	}
	if testHookLatest != nil {
		testHookLatest()
	}
	// Corrupt rows among the newest: read on in a read transaction, so
	// that the later windows are one snapshot...
	c, err := s.st.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer func() {
		if _, err := c.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
			s.st.rollback(ctx, c)
		}
	}()
	// ...and the same snapshot as the first one: ids only grow and are
	// never reused, so if the rows from the oldest seen up are as many as
	// read and end at the same newest id, nothing seen has changed.
	var count, top int64
	if err := c.QueryRowContext(ctx, s.st.q.since, s.id, d.lastID).Scan(&count, &top); err != nil {
		return err
	}
	below, size := d.lastID, double(int64(n))
	if count != read || top != newest {
		*d = decoder{newestFirst: true, items: d.items[:0]} // changed: start over
		below = math.MaxInt64
	}
	for {
		got, _, err := s.window(ctx, c, d, n, below, size)
		if err != nil || len(d.items) >= n || got < size {
			return err
		}
		below, size = d.lastID, double(size)
	}
}

// double returns 2x, or math.MaxInt64 if that overflows.
func double(x int64) int64 { return min(x, math.MaxInt64/2) * 2 }

// testHookLatest, when set by a test, runs between the first window of
// LatestItems and the later ones.
var testHookLatest func()

// AddItems appends items as one atomic batch: one transaction that
// creates or refreshes the session row and inserts every item. An empty
// batch writes nothing.
func (s *Session) AddItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	return s.st.write(ctx, "add items", func(ctx context.Context, c *sql.Conn) error {
		return s.insert(ctx, c, items)
	})
}

// insert writes the session row and items inside a write transaction.
func (s *Session) insert(ctx context.Context, c *sql.Conn, items []session.Item) error {
	if _, err := c.ExecContext(ctx, s.st.q.upsertSession, s.id); err != nil {
		return err
	}
	args := make([]any, 0, min(len(items), maxRowsPerInsert)+1)
	for len(items) > 0 {
		chunk := items[:min(len(items), maxRowsPerInsert)]
		items = items[len(chunk):]
		args = append(args[:0], s.id)
		for _, it := range chunk {
			// A string binds as TEXT, as Python's json.dumps output does.
			args = append(args, string(it.Bytes()))
		}
		if _, err := c.ExecContext(ctx, s.st.q.insertSQL(len(chunk)), args...); err != nil {
			return err
		}
	}
	return nil
}

// PopItem removes and returns the newest item, in one transaction. A
// corrupt newest row is deleted too, reported, and the pop goes on to the
// next row, as Python's does. An empty session gives ok == false.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.st.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	var (
		item session.Item
		ok   bool
		d    decoder
	)
	err := s.st.write(ctx, "pop item", func(ctx context.Context, c *sql.Conn) error {
		item, ok, d = session.Item{}, false, decoder{}
		for {
			rows, err := c.QueryContext(ctx, s.st.q.pop, s.id)
			if err != nil {
				return err
			}
			found := rows.Next()
			if found {
				err = d.scan(rows)
			}
			if cerr := closeRows(rows); err == nil {
				err = cerr
			}
			if err != nil || !found {
				return err
			}
			if len(d.items) > 0 {
				item, ok = d.items[0], true
				return nil
			}
		}
	})
	if err != nil {
		return session.Item{}, false, err
	}
	d.report(ctx, s) // the deleted corrupt rows, now that the delete committed
	return item, ok, nil
}

// Clear deletes the session's items and its session row, in one
// transaction.
func (s *Session) Clear(ctx context.Context) error {
	return s.st.write(ctx, "clear", func(ctx context.Context, c *sql.Conn) error {
		return s.clear(ctx, c)
	})
}

func (s *Session) clear(ctx context.Context, c *sql.Conn) error {
	if _, err := c.ExecContext(ctx, s.st.q.clearMessages, s.id); err != nil {
		return err
	}
	_, err := c.ExecContext(ctx, s.st.q.clearSession, s.id)
	return err
}

// ReplaceItems atomically replaces the history with items: one transaction
// deletes every row of the session and inserts items. Replacing with no
// items is Clear.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	return s.st.write(ctx, "replace items", func(ctx context.Context, c *sql.Conn) error {
		if err := s.clear(ctx, c); err != nil {
			return err
		}
		if len(items) == 0 {
			return nil
		}
		return s.insert(ctx, c, items)
	})
}

// decoder turns rows of (id, message_data) into items, setting corrupt
// rows aside for reporting once the database is no longer in use: a
// handler may call back into the store.
type decoder struct {
	newestFirst bool
	items       []session.Item
	corrupt     []driver.CorruptRecord
	lastID      int64
	raw         sql.NullString // scan target, reused from row to row
}

func (d *decoder) scan(rows *sql.Rows) error {
	if err := rows.Scan(&d.lastID, &d.raw); err != nil {
		return err
	}
	raw := d.raw.String
	d.raw.String = ""
	it, err := driver.DecodeStoredString(raw)
	if err != nil {
		d.corrupt = append(d.corrupt, driver.CorruptRecord{Position: "id=" + strconv.FormatInt(d.lastID, 10), Raw: []byte(raw), Err: err})
		return nil
	}
	d.items = append(d.items, it)
	return nil
}

// report sends the corrupt rows to the Store's handler, oldest first.
func (d *decoder) report(ctx context.Context, s *Session) {
	for i := range d.corrupt {
		r := d.corrupt[i]
		if d.newestFirst {
			r = d.corrupt[len(d.corrupt)-1-i]
		}
		r.SessionID = s.id
		s.st.opts.OnCorrupt.Report(ctx, r)
	}
}

// closeRows closes rows and returns the iteration's error.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}
