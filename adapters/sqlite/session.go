package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Session is a handle on one session of a Store. It implements
// session.LatestReader, session.VersionedReplacer,
// session.CheckpointCommitter (checkpoints.go), session.Follower
// (follow.go) and session.OnceAppender (once.go), and is safe for
// concurrent use. On an AdvancedSQLiteSession store it reads and writes
// its current branch, and has the class's branch (branches.go), turn and
// usage calls (turns.go); see the package documentation.
type Session struct {
	st *Store
	id string
	// br is the current branch on an AdvancedSQLiteSession store
	// (advanced.go, branches.go).
	br branchPointer
}

var (
	_ session.LatestReader      = (*Session)(nil)
	_ session.VersionedReplacer = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// Items returns the whole history, oldest first. Corrupt rows are skipped
// and reported.
func (s *Session) Items(ctx context.Context) ([]session.Item, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	if s.st.isAdvanced() {
		return s.branchItems(ctx)
	}
	// message_data alone, unless an unreadable row needs its id reported.
	var d decoder
	clean, err := s.dataOnly(ctx, &d, s.st.rs.itemsData, math.MaxInt, s.id)
	if err != nil {
		return nil, s.st.wrap(ctx, "items", err)
	}
	if !clean {
		d = decoder{items: d.items[:0]}
		rows, err := s.st.rs.items.QueryContext(ctx, s.id)
		if err := scanRows(rows, err, &d); err != nil {
			return nil, s.st.wrap(ctx, "items", err)
		}
		d.report(ctx, s)
	}
	return d.all(), nil
}

// LatestItems returns the newest n items, oldest first. It reads the
// newest n rows through the (session_id, id) index in one statement; only
// when unreadable rows are among them does it read again, in a read
// transaction, with the rows' ids, below the oldest row seen in windows
// twice as large each time. The cost follows n and the unreadable rows
// among the newest, never the length of the history.
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
	latest := s.latest
	if s.st.isAdvanced() {
		latest = s.branchLatest
	}
	if err := latest(ctx, n, &d); err != nil {
		return nil, s.st.wrap(ctx, "latest items", err)
	}
	d.report(ctx, s)
	out := d.items
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// window decodes the rows of the session below id below, newest first,
// on c, until d holds n items; it returns the rows read.
func (s *Session) window(ctx context.Context, c *sql.Conn, d *decoder, n int, below, size int64) (read int64, err error) {
	rows, err := c.QueryContext(ctx, s.st.q.latest, s.id, below, size)
	if err != nil {
		return 0, err
	}
	for len(d.items) < n && rows.Next() {
		if err := d.scan(rows); err != nil {
			rows.Close()
			return 0, err
		}
		read++
	}
	return read, closeRows(rows)
}

func (s *Session) latest(ctx context.Context, n int, d *decoder) error {
	// The common case is one statement (one snapshot, no transaction)
	// reading message_data alone, the newest n rows, all readable.
	clean, err := s.dataOnly(ctx, d, s.st.rs.latestData, n, s.id, int64(n))
	if err != nil || clean {
		return err
	}
	if testHookLatest != nil {
		testHookLatest()
	}
	// Unreadable rows among the newest: start over with their ids (for
	// the reports, and to read on below them), in a read transaction, so
	// that every window is one snapshot.
	*d = decoder{newestFirst: true, items: d.items[:0]}
	return s.st.newestWindows(ctx, d, n, func(c *sql.Conn, below, size int64) (int64, error) {
		return s.window(ctx, c, d, n, below, size)
	})
}

// dataOnly runs stmt (which selects message_data alone) with args and
// decodes up to n rows into d. It stops at the first unreadable row and
// reports clean == false, leaving d to be reset: the caller reads again
// with the rows' ids.
func (s *Session) dataOnly(ctx context.Context, d *decoder, stmt *sql.Stmt, n int, args ...any) (clean bool, err error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return false, err
	}
	clean = true
	if n < math.MaxInt {
		d.dec.Expect(n)
	}
	for len(d.items) < n && rows.Next() {
		if err := rows.Scan(&d.raw); err != nil {
			rows.Close()
			return false, err
		}
		it, err := d.dec.DecodeString(d.text())
		if err != nil {
			clean = false
			break
		}
		d.items = append(d.items, it)
	}
	return clean, closeRows(rows)
}

// double returns 2x, or math.MaxInt64 if that overflows.
func double(x int64) int64 { return min(x, math.MaxInt64/2) * 2 }

// testHookLatest, when set by a test, runs between the first window of
// LatestItems and the later ones.
var testHookLatest func()

// AddItems appends items as one atomic batch: the session row is created
// or refreshed and every item inserted, contiguous, in one transaction. An
// empty batch writes nothing.
//
// Concurrent calls on one Store, on any sessions, are committed together
// (group commit, see the package documentation); each call returns after
// the commit that holds its batch, and a batch that fails fails alone.
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
	return s.st.writeW(ctx, "add items", false, func(ctx context.Context, w *wconn, _ bool) error {
		return s.insert(ctx, w, items)
	})
}

// insert writes the session row and items inside a write transaction,
// and on an AdvancedSQLiteSession store their structure rows on the
// current branch.
func (s *Session) insert(ctx context.Context, w *wconn, items []session.Item) error {
	if err := s.insertRows(ctx, w, items); err != nil {
		return err
	}
	if !w.advanced {
		return nil
	}
	return s.insertStructure(ctx, w, len(items), func(i int) []byte { return items[i].Bytes() })
}

// insertRows writes the session row and the items' message rows.
func (s *Session) insertRows(ctx context.Context, w *wconn, items []session.Item) error {
	if err := w.exec(ctx, s.st.q.upsertSession, s.id); err != nil {
		return err
	}
	var buf [maxCachedInsert + 1]any
	args := buf[:0]
	for len(items) > 0 {
		chunk := items[:min(len(items), maxRowsPerInsert)]
		items = items[len(chunk):]
		args = append(args[:0], s.id)
		for _, it := range chunk {
			// A string binds as TEXT, as Python's json.dumps output does.
			// The driver copies it while binding, and items never change:
			// no copy is needed here.
			b := it.Bytes()
			args = append(args, unsafe.String(unsafe.SliceData(b), len(b)))
		}
		var err error
		if len(chunk) <= maxCachedInsert {
			err = w.exec(ctx, s.st.q.insertSQL(len(chunk)), args...)
		} else {
			err = w.execOnce(ctx, s.st.q.insertSQL(len(chunk)), args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PopItem removes and returns the newest item, in one transaction.
//
// The common case is one statement, DELETE ... RETURNING on the newest
// row. An unreadable record is never deleted: if the row it removed is one,
// the delete is rolled back (in the same transaction) and PopItem walks
// down from the newest row, reporting each unreadable record it passes and
// leaving it in place, and deletes the newest readable one. A session
// without a readable item gives ok == false and deletes nothing.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.st.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	var (
		item session.Item
		ok   bool
		d    decoder
	)
	err := s.st.writeW(ctx, "pop item", true, func(ctx context.Context, w *wconn, redo bool) error {
		item, ok, d = session.Item{}, false, decoder{newestFirst: true}
		if w.advanced {
			var err error
			item, ok, err = s.popAdvanced(ctx, w, &d)
			return err
		}
		if redo {
			var err error
			item, ok, err = s.popReadable(ctx, w, &d)
			return err
		}
		stmt, err := w.stmt(ctx, s.st.q.pop)
		if err != nil {
			return err
		}
		rows, err := stmt.QueryContext(ctx, s.id)
		if err != nil {
			return err
		}
		found := rows.Next()
		if found {
			err = rows.Scan(&d.raw)
		}
		if cerr := closeRows(rows); err == nil {
			err = cerr
		}
		if err != nil || !found {
			return err
		}
		it, derr := driver.DecodeStoredString(d.text())
		if derr != nil {
			// Unreadable: undo the delete; the walk down reads it again,
			// with its id, and reports it.
			return errRedo
		}
		d.items = append(d.items, it)
		item, ok = d.items[0], true
		return nil
	})
	if err != nil {
		return session.Item{}, false, err
	}
	d.report(ctx, s) // the unreadable rows passed over, now that the write is done
	return item, ok, nil
}

// popReadable deletes the newest readable row of the session, reading down
// from the newest in windows that double, inside the write transaction.
func (s *Session) popReadable(ctx context.Context, w *wconn, d *decoder) (session.Item, bool, error) {
	stmt, err := w.stmt(ctx, s.st.q.latest)
	if err != nil {
		return session.Item{}, false, err
	}
	below, size := int64(math.MaxInt64), int64(16)
	for {
		rows, err := stmt.QueryContext(ctx, s.id, below, size)
		if err != nil {
			return session.Item{}, false, err
		}
		var read int64
		for len(d.items) == 0 && rows.Next() {
			if err := d.scan(rows); err != nil {
				rows.Close()
				return session.Item{}, false, err
			}
			read++
		}
		if err := closeRows(rows); err != nil {
			return session.Item{}, false, err
		}
		if len(d.items) > 0 {
			if err := w.exec(ctx, s.st.q.deleteID, d.lastID); err != nil {
				return session.Item{}, false, err
			}
			return d.items[0], true, nil
		}
		if read < size {
			return session.Item{}, false, nil
		}
		below, size = d.lastID, double(size)
	}
}

// Clear deletes the session's items and its session row, in one
// transaction. Its checkpoints stay (Store.RemoveSession deletes them
// too).
func (s *Session) Clear(ctx context.Context) error {
	return s.st.writeW(ctx, "clear", false, func(ctx context.Context, w *wconn, _ bool) error {
		return s.clear(ctx, w)
	})
}

func (s *Session) clear(ctx context.Context, w *wconn) error {
	if w.advanced {
		return s.clearAdvanced(ctx, w)
	}
	if err := w.exec(ctx, s.st.q.clearMessages, s.id); err != nil {
		return err
	}
	return w.exec(ctx, s.st.q.clearSession, s.id)
}

// ReplaceItems atomically replaces the history with items: one transaction
// deletes every message row of the session and inserts items. The session
// row stays, so its created_at is kept (updated_at moves to now), as
// repair and compaction replace a conversation, not start a new one.
// Replacing with no items is Clear. Checkpoints stay either way.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	return s.st.writeW(ctx, "replace items", false, func(ctx context.Context, w *wconn, _ bool) error {
		return s.replace(ctx, w, items)
	})
}

// replace writes items in place of the history inside a write
// transaction: on the current branch of an AdvancedSQLiteSession store,
// otherwise every message row deleted and items inserted (Clear for none).
func (s *Session) replace(ctx context.Context, w *wconn, items []session.Item) error {
	if w.advanced {
		return s.replaceAdvanced(ctx, w, items)
	}
	if len(items) == 0 {
		return s.clear(ctx, w)
	}
	if err := w.exec(ctx, s.st.q.clearMessages, s.id); err != nil {
		return err
	}
	return s.insert(ctx, w, items)
}

// HistoryVersion returns the version of the session's stored rows: their
// count and the newest id (on an AdvancedSQLiteSession store, those of
// the current branch's structure rows). AUTOINCREMENT never hands out an
// id twice, so a changed history never brings an old version back.
func (s *Session) HistoryVersion(ctx context.Context) (string, error) {
	if err := s.st.check(ctx); err != nil {
		return "", err
	}
	if s.st.isAdvanced() {
		branch, err := s.readBranch(ctx)
		if err != nil {
			return "", s.st.wrap(ctx, "read the history version", err)
		}
		v, err := s.branchVersion(ctx, s.st.db, branch)
		if err != nil {
			return "", s.st.wrap(ctx, "read the history version", err)
		}
		return v, nil
	}
	var v string
	if err := s.st.db.QueryRowContext(ctx, s.st.q.version, s.id).Scan(&v); err != nil {
		return "", s.st.wrap(ctx, "read the history version", err)
	}
	return v, nil
}

// ReplaceItemsIf replaces the history with items, as ReplaceItems does, if
// its version is still version, checked in the replacing transaction;
// otherwise it returns an error wrapping session.ErrHistoryChanged and
// writes nothing.
func (s *Session) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	return s.st.writeW(ctx, "replace items", false, func(ctx context.Context, w *wconn, _ bool) error {
		var now string
		if w.advanced {
			branch, err := s.branchIn(ctx, w.c)
			if err != nil {
				return err
			}
			if now, err = s.branchVersion(ctx, w.c, branch); err != nil {
				return err
			}
		} else {
			stmt, err := w.stmt(ctx, s.st.q.version)
			if err != nil {
				return err
			}
			if err := stmt.QueryRowContext(ctx, s.id).Scan(&now); err != nil {
				return err
			}
		}
		if now != version {
			return untouched(fmt.Errorf("session %q: %w", s.id, session.ErrHistoryChanged))
		}
		return s.replace(ctx, w, items)
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
	raw         any // scan target, reused from row to row (see text)
	dec         driver.Decoder
}

func (d *decoder) scan(rows *sql.Rows) error {
	if err := rows.Scan(&d.lastID, &d.raw); err != nil {
		return err
	}
	raw := d.text()
	it, err := d.dec.DecodeString(raw)
	if err != nil {
		d.corrupt = append(d.corrupt, driver.CorruptRecord{Position: "id=" + strconv.FormatInt(d.lastID, 10), Raw: []byte(raw), Err: err})
		return nil
	}
	d.items = append(d.items, it)
	return nil
}

// all returns the items decoded, an empty slice (not nil) for none.
func (d *decoder) all() []session.Item {
	if d.items == nil {
		return []session.Item{}
	}
	return d.items
}

// scanRows decodes every row of rows into d and closes rows; err is the
// query's error, returned as it is (rows is then nil).
func scanRows(rows *sql.Rows, err error, d *decoder) error {
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := d.scan(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return closeRows(rows)
}

// text returns the value last scanned into d.raw as text, and clears
// d.raw. TEXT comes as the string the driver returned; any other value a
// row may hold (SQLite's columns take any type) as database/sql converts
// it to a string, NULL as "": all of them unreadable records.
func (d *decoder) text() string {
	v := d.raw
	d.raw = nil
	if s, ok := v.(string); ok {
		return s
	}
	var ns sql.NullString
	if err := ns.Scan(v); err != nil {
		return fmt.Sprint(v)
	}
	return ns.String
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
