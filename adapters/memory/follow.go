package memory

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// A cursor is "m" and the store's number of the last item read: the
// numbers of a history only grow, and none is used twice in a store, so
// the cursor is lost exactly when that record is gone.
const cursorPrefix = "m"

func parseCursor(c session.Cursor) (uint64, error) {
	if c == "" {
		return 0, nil
	}
	digits, ok := strings.CutPrefix(string(c), cursorPrefix)
	n, err := strconv.ParseUint(digits, 10, 64)
	if !ok || err != nil || n == 0 || strconv.FormatUint(n, 10) != digits {
		return 0, fmt.Errorf("%w: %q is not a memory cursor", session.ErrInvalidCursor, string(c))
	}
	return n, nil
}

// ItemsSince returns the items after cursor and the cursor after them,
// reading only the records after it.
func (s *Session) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	after, err := parseCursor(cursor)
	if err != nil {
		return nil, cursor, err
	}
	if err := ctx.Err(); err != nil {
		return nil, cursor, err
	}
	if err := s.st.lock(); err != nil {
		return nil, cursor, err
	}
	var recs []record
	h := s.lookup(false)
	var from int
	if h != nil {
		if s.st.opts.RefreshOnRead {
			s.touch(h)
		}
		from = sort.Search(len(h.records), func(i int) bool { return h.records[i].seq > after })
		recs = h.records[from:]
	}
	if after != 0 && (from == 0 || h.records[from-1].seq != after) {
		s.st.mu.Unlock()
		return nil, cursor, session.ErrCursorLost
	}
	// The records are immutable once stored; copies are taken below,
	// outside the lock.
	recs = append([]record(nil), recs...)
	s.st.mu.Unlock()

	var dec driver.Decoder
	dec.Expect(len(recs))
	var out []session.Item
	next := cursor
	for i, r := range recs {
		raw := append([]byte(nil), r.raw...)
		it, err := dec.Decode(raw)
		if err != nil {
			s.st.opts.OnCorrupt.Report(ctx, driver.CorruptRecord{
				SessionID: s.id, Position: "index " + strconv.Itoa(from+i), Raw: raw, Err: err})
			continue
		}
		out = append(out, it)
		// A corrupt record is never popped: the cursor names the last
		// readable item, which a pop would remove first.
		next = session.Cursor(cursorPrefix + strconv.FormatUint(r.seq, 10))
	}
	return out, next, nil
}
