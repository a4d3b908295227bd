package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Session is a handle on one session of a Store. It implements
// session.LatestReader, session.VersionedReplacer (version.go),
// session.CheckpointCommitter (checkpoints.go), session.Follower
// (follow.go) and session.OnceAppender (once.go), and is safe for
// concurrent use.
type Session struct {
	st  *Store
	id  string // the caller's id
	sid string // its stored form (see storedID)
}

var (
	_ session.LatestReader      = (*Session)(nil)
	_ session.VersionedReplacer = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// Items returns the whole history, oldest first, in one statement (one
// snapshot). Corrupt rows are skipped and reported.
func (s *Session) Items(ctx context.Context) ([]session.Item, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	var d decoder
	rows, err := s.st.pool.Query(ctx, s.st.q.items, s.sid)
	if err == nil {
		err = d.scanAll(rows, math.MaxInt)
	}
	if err != nil {
		return nil, s.st.wrap(ctx, "items", err)
	}
	d.report(ctx, s)
	if d.items == nil {
		return []session.Item{}, nil
	}
	return d.items, nil
}

// LatestItems returns the newest n items, oldest first. It reads the
// newest n rows through the (session_id, created_at, id) index in one
// statement; only
// when corrupt rows leave that window short of n items does it read again,
// in one REPEATABLE READ snapshot, windows twice as large each time below
// the oldest row seen. The cost follows n and the corrupt rows among the
// newest, never the length of the history.
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

func (s *Session) latest(ctx context.Context, n int, d *decoder) error {
	rows, err := s.st.pool.Query(ctx, s.st.q.latestTop, s.sid, int64(n))
	if err != nil {
		return err
	}
	if err := d.scanAll(rows, n); err != nil {
		return err
	}
	if len(d.items) >= n || d.read < int64(n) {
		return nil
	}
	// Corrupt rows among the newest: start over in one snapshot, so that
	// the windows below the first one see the same history.
	return pgx.BeginTxFunc(ctx, s.st.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		*d = decoder{newestFirst: true, items: d.items[:0]}
		d.lastAt, d.lastID = "infinity", math.MaxInt64
		size := int64(n)
		for {
			d.read = 0
			rows, err := tx.Query(ctx, s.st.q.latest, s.sid, d.lastAt, d.lastID, size)
			if err != nil {
				return err
			}
			if err := d.scanAll(rows, n); err != nil {
				return err
			}
			if len(d.items) >= n || d.read < size {
				return nil
			}
			size = min(size, math.MaxInt64/2) * 2
		}
	})
}

// AddItems appends items as one atomic batch: one implicit transaction,
// sent in one round trip, that locks the session row (so that the
// session's writers queue), creates it or refreshes its updated_at, and
// inserts every item in order with one statement, under one created_at
// later than every row before it.
// An empty batch writes nothing.
//
// An error wrapping session.ErrOutcomeUnknown means the batch may have
// been committed: the statements and their commit had been sent when the
// deadline passed or the connection failed (read the session before
// appending again). Any other error means nothing was written.
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
	data := texts(items)
	return s.write(ctx, "add items", func(b *batch) {
		b.queue(s.st.q.lockKey, s.sid)
		b.queue(s.st.q.lockSession, s.sid)
		b.queue(s.st.q.upsertSession, s.sid)
		b.queue(s.st.q.insert, s.sid, data)
	})
}

// texts returns the items' JSON text, as message_data stores it.
func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// Clear deletes the session's rows and its session row, in one implicit
// transaction sent in one round trip. Its checkpoints stay
// (Store.RemoveSession deletes them too).
func (s *Session) Clear(ctx context.Context) error {
	if err := s.st.check(ctx); err != nil {
		return err
	}
	return s.write(ctx, "clear", func(b *batch) {
		b.queue(s.st.q.lockKey, s.sid)
		b.queue(s.st.q.lockSession, s.sid)
		b.queue(s.st.q.clearMessages, s.sid)
		b.queue(s.st.q.clearSession, s.sid)
	})
}

// ReplaceItems atomically replaces the history with items: one implicit
// transaction, one round trip, locks the session row, deletes every row of
// the session and inserts items. Replacing with no items is Clear. Its
// errors are AddItems's: session.ErrOutcomeUnknown when the commit may
// have happened, and otherwise nothing was written.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return s.Clear(ctx)
	}
	data := texts(items)
	return s.write(ctx, "replace items", func(b *batch) {
		b.queue(s.st.q.lockKey, s.sid)
		b.queue(s.st.q.lockSession, s.sid)
		b.queue(s.st.q.upsertSession, s.sid)
		b.queue(s.st.q.clearMessages, s.sid)
		b.queue(s.st.q.insert, s.sid, data)
	})
}

// batch is the statements of one write.
type batch struct {
	b    pgx.Batch
	n    int
	scan []any // the destinations of the last statement's one row, if any
}

func (b *batch) queue(sql string, args ...any) {
	b.b.Queue(sql, args...)
	b.n++
}

// write sends the statements fill queues as one batch: pgx pipelines them
// with one Sync, so they run in one implicit transaction, in one round
// trip, and land whole or not at all. The Sync that commits them is sent
// with them: once the batch is sent, an error PostgreSQL did not report
// (a deadline, a lost connection) leaves the outcome unknown.
func (s *Session) write(ctx context.Context, op string, fill func(*batch)) error {
	var b batch
	fill(&b)
	c, err := s.st.pool.Acquire(ctx)
	if err != nil {
		return s.st.wrap(ctx, op, err)
	}
	defer c.Release()
	br := c.SendBatch(ctx, &b.b)
	for i := 0; i < b.n && err == nil; i++ {
		if i == b.n-1 && b.scan != nil {
			err = br.QueryRow().Scan(b.scan...)
		} else {
			_, err = br.Exec()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return s.st.wrap(ctx, op, sent(s.idError(err)))
}

// decoder turns rows of (id, message_data) into items, setting corrupt
// rows aside for reporting once no connection is held: a handler may call
// back into the store.
type decoder struct {
	newestFirst bool
	items       []session.Item
	corrupt     []driver.CorruptRecord
	lastID      int64  // id of the last row read
	lastAt      string // its created_at, as text, when the query returns it
	read        int64  // rows read
	dec         driver.Decoder
}

// scanAll reads rows until they end or d holds n items, and closes them.
func (d *decoder) scanAll(rows pgx.Rows, n int) error {
	defer rows.Close()
	if n < math.MaxInt {
		d.dec.Expect(n - len(d.items))
	}
	for len(d.items) < n && rows.Next() {
		if err := d.scan(rows); err != nil {
			return err
		}
	}
	rows.Close()
	return rows.Err()
}

// scan decodes the current row. It reads the raw wire values, which skips
// pgx's reflective Scan: the id is int8 or int4 (a table Python made), in
// the binary or text format, and message_data's bytes are the text itself.
func (d *decoder) scan(rows pgx.Rows) error {
	vals := rows.RawValues()
	if len(vals) != 2 && len(vals) != 3 {
		return fmt.Errorf("want 2 or 3 columns, got %d", len(vals))
	}
	id, err := parseID(vals[0], rows.FieldDescriptions()[0].Format)
	if err != nil {
		return err
	}
	d.lastID = id
	if len(vals) == 3 {
		d.lastAt = string(vals[2])
	}
	d.read++
	raw := string(vals[1])
	it, err := decodeStored(&d.dec, raw)
	if err != nil {
		d.corrupt = append(d.corrupt, driver.CorruptRecord{Position: "id=" + strconv.FormatInt(id, 10), Raw: []byte(raw), Err: err})
		return nil
	}
	d.items = append(d.items, it)
	return nil
}

// decodeStored is driver.Decoder's DecodeString; a test replaces it to
// make Go and PostgreSQL disagree about a row.
var decodeStored = (*driver.Decoder).DecodeString

// parseID decodes an id column value in the given wire format.
func parseID(b []byte, format int16) (int64, error) {
	if format == pgx.BinaryFormatCode {
		switch len(b) {
		case 8:
			return int64(uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
				uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])), nil
		case 4:
			return int64(int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))), nil
		}
		return 0, fmt.Errorf("id column: %d bytes in binary format", len(b))
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("id column: %w", err)
	}
	return id, nil
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
