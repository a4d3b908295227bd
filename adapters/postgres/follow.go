package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Following.
//
// A cursor names the session (a hash of its stored id), the last readable
// row a reader was given (r) and the last row it read past (x, beyond r
// only when corrupt rows followed r), each as (id, created_at):
// "p1:<hash>:<r id>,<r created_at>,<x id>,<x created_at>", with
// created_at to the microsecond as ISO 8601 text (whatever the
// connection's DateStyle). ItemsSince is one statement (one snapshot)
// walking the (session_id, created_at, id) index from r on, in Items'
// order: the first row must be r itself, or the history changed at or
// before the cursor. No write removes a row below a row that stays
// (PopItem removes the newest readable row, Python's pop the newest row;
// Clear and replaces remove every row, and ids are never reused), so while
// r is there nothing up to it is gone. A cursor that has seen no readable
// row has nothing to lose.
//
// What a follower is given after its cursor is what sorts after x. A
// batch of this package always does: its created_at is later than every
// row of the session committed before it, under the session's lock, so
// its rows are read by the next ItemsSince after its commit. A batch of
// Python's SQLAlchemySession takes its created_at from the server's clock
// without that lock: one that commits after a follower read past its
// created_at sorts before the cursor and is never given to that follower
// (Items and a read from the zero cursor show it).

var _ session.Follower = (*Session)(nil)

// cursorTimeFormat is to_char's format of a created_at in a cursor, and
// cursorTimeLayout Go's.
const (
	cursorTimeFormat = `YYYY-MM-DD"T"HH24:MI:SS.US`
	cursorTimeLayout = "2006-01-02T15:04:05.000000"
	cursorPrefix     = "p1:"
)

// position is a cursor's r and x; a zero id is "none".
type position struct {
	rID, xID int64
	rAt, xAt string
}

// sessionTag names the session in its cursors, so that a cursor another
// session returned is refused rather than read as this one's.
func sessionTag(sid string) string {
	h := fnv.New32a()
	h.Write([]byte(sid))
	return fmt.Sprintf("%08x", h.Sum32())
}

func formatCursor(sid string, p position) session.Cursor {
	return session.Cursor(cursorPrefix + sessionTag(sid) + ":" + strconv.FormatInt(p.rID, 10) + "," + p.rAt + "," + strconv.FormatInt(p.xID, 10) + "," + p.xAt)
}

func (s *Session) parseCursor(c session.Cursor) (position, error) {
	if c == "" {
		return position{}, nil
	}
	invalid := fmt.Errorf("postgres: %w: %q is not a cursor of session %s", session.ErrInvalidCursor, string(c), quoteShort(s.id))
	rest, ok := strings.CutPrefix(string(c), cursorPrefix+sessionTag(s.sid)+":")
	f := strings.Split(rest, ",")
	if !ok || len(f) != 4 {
		return position{}, invalid
	}
	var p position
	var err error
	if p.rID, err = cursorID(f[0], f[1]); err != nil {
		return position{}, invalid
	}
	if p.xID, err = cursorID(f[2], f[3]); err != nil {
		return position{}, invalid
	}
	p.rAt, p.xAt = f[1], f[3]
	if p.rID != 0 && (p.xID == 0 || after(p.rAt, p.rID, p.xAt, p.xID)) {
		return position{}, invalid
	}
	return p, nil
}

// cursorID parses one (id, created_at) of a cursor: a positive id and a
// time in cursorTimeLayout, or 0 and "".
func cursorID(id, at string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	switch {
	case err != nil:
		return 0, err
	case n == 0 && at == "" && id == "0":
		return 0, nil
	case n <= 0 || id != strconv.FormatInt(n, 10):
		return 0, strconv.ErrSyntax
	}
	t, err := time.Parse(cursorTimeLayout, at)
	if err != nil || t.Format(cursorTimeLayout) != at {
		return 0, strconv.ErrSyntax
	}
	return n, nil
}

// after reports whether the row (at, id) sorts after (pAt, pID).
func after(at string, id int64, pAt string, pID int64) bool {
	return at > pAt || at == pAt && id > pID
}

// ItemsSince returns the items appended after cursor, oldest first, and
// the cursor after them (cursor itself when nothing is new), in one
// statement whose cost follows the rows after the cursor, not the
// history. It returns session.ErrCursorLost when the history changed at
// or before the cursor, and an error wrapping session.ErrInvalidCursor for
// a cursor no handle on this session returned. Corrupt rows are skipped
// and reported once. Beside Python writers, see the package
// documentation for what a follower may miss.
func (s *Session) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	p, err := s.parseCursor(cursor)
	if err != nil {
		return nil, cursor, err
	}
	if err := s.st.check(ctx); err != nil {
		return nil, cursor, err
	}
	var d decoder
	next, lost, err := s.since(ctx, &d, p)
	if err != nil {
		return nil, cursor, s.st.wrap(ctx, "items since", err)
	}
	d.report(ctx, s)
	if lost {
		return nil, cursor, fmt.Errorf("postgres: session %s: %w", quoteShort(s.id), session.ErrCursorLost)
	}
	if next == p {
		return nil, cursor, nil
	}
	return d.items, formatCursor(s.sid, next), nil
}

// sincePage is the most rows one statement of ItemsSince reads (see
// queries.since).
const sincePage = 1000

// since reads the rows from r (or x, or the start) on into d and returns
// the position after them, or lost when the first row is not r. It reads
// pages of sincePage rows, each from the last row of the one before, which
// must still be there: if it is not, the history changed meanwhile, and
// since returns what it read, as of the pages before.
func (s *Session) since(ctx context.Context, d *decoder, p position) (next position, lost bool, err error) {
	fromAt, fromID := "-infinity", int64(-1<<63)
	switch {
	case p.rID != 0:
		fromAt, fromID = p.rAt, p.rID
	case p.xID != 0:
		fromAt, fromID = p.xAt, p.xID
	}
	next = p
	checkAt, checkID := p.rAt, p.rID // the row the page must start with (none: 0)
	for first := true; ; first = false {
		var read int
		var changed bool
		fromAt, fromID, read, changed, err = s.sincePage(ctx, d, &next, fromAt, fromID, checkAt, checkID)
		switch {
		case err != nil:
			return p, false, err
		case changed && first:
			return p, true, nil
		case changed || read < sincePage:
			return next, false, nil
		}
		checkAt, checkID = fromAt, fromID
	}
}

// sincePage reads one page from (fromAt, fromID) on, advancing next, and
// returns the last row it read; changed reports a first row that is not
// (checkAt, checkID).
func (s *Session) sincePage(ctx context.Context, d *decoder, next *position, fromAt string, fromID int64, checkAt string, checkID int64) (lastAt string, lastID int64, read int, changed bool, err error) {
	rows, err := s.st.pool.Query(ctx, s.st.q.since, s.sid, fromAt, fromID, sincePage)
	if err != nil {
		return "", 0, 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		read++
		vals := rows.RawValues()
		id, err := parseID(vals[0], rows.FieldDescriptions()[0].Format)
		if err != nil {
			return "", 0, 0, false, err
		}
		at := string(vals[2])
		lastAt, lastID = at, id
		if checkID != 0 {
			if id != checkID || at != checkAt {
				return "", 0, 0, true, nil
			}
			checkID = 0
			continue
		}
		if next.xID != 0 && !after(at, id, next.xAt, next.xID) {
			continue // corrupt rows the reader was told of
		}
		next.xID, next.xAt = id, at
		raw := string(vals[1])
		it, derr := decodeStored(&d.dec, raw)
		if derr != nil {
			d.corrupt = append(d.corrupt, driver.CorruptRecord{Position: "id=" + strconv.FormatInt(id, 10), Raw: []byte(raw), Err: derr})
			continue
		}
		d.items = append(d.items, it)
		next.rID, next.rAt = id, at
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", 0, 0, false, err
	}
	return lastAt, lastID, read, checkID != 0, nil
}
