package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Following.
//
// A cursor names the session (a hash of its id) and the last readable row
// a reader was given (r) and the last row it read past (x, beyond r only
// when unreadable rows followed r): "s1:<hash>:<r>" or "s1:<hash>:<r>:<x>",
// by row id; on an AdvancedSQLiteSession store,
// "a1:<hash>:<r's sequence number>:<r's id>:<x's sequence number>". ItemsSince is
// one statement (one snapshot) through the (session_id, id) index, from r
// on: the first row must be r itself, or the history changed at or before
// the cursor. That is enough because no write removes a row below a row
// that stays: PopItem removes the newest readable row (Python's pop the
// newest row), and Clear and replaces remove every row, replaces
// inserting theirs under new ids (AUTOINCREMENT never hands an id out
// twice). So while r is there, every row up to it is; once it is gone,
// the reader is told. A cursor that has seen no readable row (r = 0: the
// zero cursor, or a history of unreadable rows) has nothing to lose.

var _ session.Follower = (*Session)(nil)

// followQueries are the statements of ItemsSince.
type followQueries struct {
	since    string // (id, message_data) of the rows from ?2 on, oldest first; advanced: (order, id, message_data)
	advanced bool   // rows are ordered by sequence number, which cursors carry (a1:)
}

// advancedFollow formats and parses the cursors of a branch of an
// AdvancedSQLiteSession store (its statement is advQueries.since).
var advancedFollow = followQueries{advanced: true}

func newFollowQueries(messages string) followQueries {
	return followQueries{since: `SELECT id, message_data FROM ` + quote(messages) + ` WHERE session_id = ?1 AND id >= ?2 ORDER BY id ASC`}
}

// position is what a cursor holds: r (order key and row id) and x (order
// key), zero for the start of the history.
type position struct {
	r, rID, x int64
}

const (
	cursorPrefix         = "s1:"
	advancedCursorPrefix = "a1:"
)

// sessionTag names the session in its cursors, so that a cursor another
// session returned is refused rather than read as this one's.
func sessionTag(id string) string {
	h := uint32(2166136261) // FNV-1a, 32 bits
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	const digits = "0123456789abcdef"
	var b [8]byte
	for i := range b {
		b[7-i] = digits[h>>(4*i)&0xf]
	}
	return string(b[:])
}

func (q *followQueries) format(id string, p position) session.Cursor {
	c := cursorPrefix + sessionTag(id) + ":" + strconv.FormatInt(p.r, 10)
	switch {
	case q.advanced:
		c = advancedCursorPrefix + sessionTag(id) + ":" + strconv.FormatInt(p.r, 10) + ":" + strconv.FormatInt(p.rID, 10) + ":" + strconv.FormatInt(p.x, 10)
	case p.x != p.r:
		c += ":" + strconv.FormatInt(p.x, 10)
	}
	return session.Cursor(c)
}

func (q *followQueries) parse(id string, c session.Cursor) (position, error) {
	if c == "" {
		return position{}, nil
	}
	invalid := fmt.Errorf("sqlite: %w: %q is not a cursor of session %q", session.ErrInvalidCursor, string(c), id)
	prefix, want := cursorPrefix, []int{1, 2}
	if q.advanced {
		prefix, want = advancedCursorPrefix, []int{3}
	}
	rest, ok := strings.CutPrefix(string(c), prefix+sessionTag(id)+":")
	fields := strings.Split(rest, ":")
	if !ok || !slices.Contains(want, len(fields)) {
		return position{}, invalid
	}
	var n [3]int64
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return position{}, invalid
		}
		n[i] = v
	}
	p := position{r: n[0], rID: n[0], x: n[0]}
	switch {
	case q.advanced:
		p = position{r: n[0], rID: n[1], x: n[2]}
	case len(fields) == 2:
		p.x = n[1]
	}
	// Only the spelling ItemsSince writes is a cursor (no sign, no leading
	// zero): "s1:<hash>:5:5" names the position of "s1:<hash>:5", but no
	// ItemsSince returned it.
	if p.x < p.r || (p.r == 0) != (p.rID == 0) || q.format(id, p) != c {
		return position{}, invalid
	}
	return p, nil
}

// ItemsSince returns the items appended after cursor, oldest first, and
// the cursor after them (cursor itself when nothing is new), in one
// statement whose cost follows the rows after the cursor, not the
// history. It returns session.ErrCursorLost when the history changed at or
// before the cursor, and an error wrapping session.ErrInvalidCursor for a
// cursor no session of this Store returns. Unreadable rows are skipped and
// reported once.
func (s *Session) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	fq, branch := &s.st.q.fq, ""
	if s.st.isAdvanced() {
		fq = &advancedFollow
	}
	p, err := fq.parse(s.id, cursor)
	if err != nil {
		return nil, cursor, err
	}
	if err := s.st.check(ctx); err != nil {
		return nil, cursor, err
	}
	if fq.advanced {
		if branch, err = s.readBranch(ctx); err != nil {
			return nil, cursor, s.st.wrap(ctx, "items since", err)
		}
	}
	from := p.r
	if p.r == 0 {
		from = p.x + 1
		if p.x == 0 {
			from = math.MinInt64 // the whole history, whatever its first key
		}
	}
	var d decoder
	next, lost, err := s.since(ctx, &d, p, from, branch)
	if err != nil {
		return nil, cursor, s.st.wrap(ctx, "items since", err)
	}
	d.report(ctx, s)
	if lost {
		return nil, cursor, fmt.Errorf("sqlite: session %q: %w", s.id, session.ErrCursorLost)
	}
	if next == p {
		return nil, cursor, nil
	}
	return d.items, fq.format(s.id, next), nil
}

// since reads the rows from from on into d and returns the position after
// them, or lost when the first row is not the cursor's r. A branch (on an
// AdvancedSQLiteSession store) reads that branch by sequence number.
func (s *Session) since(ctx context.Context, d *decoder, p position, from int64, branch string) (next position, lost bool, err error) {
	advanced := branch != ""
	var rows *sql.Rows
	if advanced {
		rows, err = s.st.db.QueryContext(ctx, s.st.aq.since, s.id, branch, from)
	} else {
		rows, err = s.st.rs.since.QueryContext(ctx, s.id, from)
	}
	if err != nil {
		return p, false, err
	}
	next = p
	check := p.r != 0
	for rows.Next() {
		var order, id int64
		var err error
		if advanced {
			err = rows.Scan(&order, &id, &d.raw)
		} else {
			err = rows.Scan(&id, &d.raw)
			order = id
		}
		if err != nil {
			rows.Close()
			return p, false, err
		}
		if check {
			check = false
			if order != p.r || id != p.rID {
				rows.Close()
				return p, true, nil
			}
			continue
		}
		if order <= p.x {
			continue // unreadable rows the reader was told of
		}
		next.x = order
		raw := d.text()
		it, derr := d.dec.DecodeString(raw)
		if derr != nil {
			d.corrupt = append(d.corrupt, driver.CorruptRecord{Position: "id=" + strconv.FormatInt(order, 10), Raw: []byte(raw), Err: derr})
			continue
		}
		d.items = append(d.items, it)
		next.r, next.rID = order, id
	}
	if err := closeRows(rows); err != nil {
		return p, false, err
	}
	return next, check, nil
}
