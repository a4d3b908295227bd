package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Following: see "Following" in the package documentation. A cursor is
// "r1:<session tag>:<epoch>:<pops>:<r>:<x>": the metadata's epoch and pop
// count it saw, r the number of records up to the last readable one it
// was given (0: none), x the number it read past (beyond r only when
// unreadable records followed). It is intact while the epoch is the same
// and the first mark after its pop count (the lowest index removed since)
// is at r or above; a cursor with r = 0 has nothing to lose, and reads
// from the start when the records it read past moved.

var _ session.Follower = (*Session)(nil)

// The metadata fields of following (native layout).
const (
	epochField = "follow_epoch"
	marksField = "follow_marks"
)

// epochEndSrc ends the epoch in KEYS[2]: every cursor is lost, and pops
// record nothing until ItemsSince starts another. The append script runs
// it when it creates the list (even when the metadata survived the list:
// a pop that emptied it is recorded, but a list deleted otherwise, by
// eviction or by hand, is not), the replace scripts always.
const epochEndSrc = `
redis.call('HDEL', KEYS[2], '` + epochField + `', '` + marksField + `')
`

// recordPopFnSrc defines record_pop(off): record in KEYS[2], if it holds
// an epoch (someone follows the session), a pop that removed index
// LLEN(KEYS[1]) - off of KEYS[1]. Without an epoch it costs one HMGET.
// The marks are "d,l" pairs, oldest first, each l above the one before,
// the last d the pop count: the pop drops the marks at its index or above
// (from the end: in the common pop after pop, the one mark there is) and
// appends its own. While their text is longer than maxMarksBytes the two
// oldest are merged into the second's pop number and the first's index,
// which can only report a cursor lost early. The script reads the marks
// from their end only (a pattern searched from the start of the text
// would cost per byte of it on every pop), from 48 bytes before it: more
// than a mark of two 20-digit numbers and its space. A last mark this
// package did not write ends the epoch: every cursor is then lost, none is
// kept wrongly, and the script, which has popped already, cannot fail.
// (Damage further back is found by ItemsSince, which then reports the
// cursor lost.)
const recordPopFnSrc = `
local function record_pop(off)
  local f = redis.call('HMGET', KEYS[2], '` + epochField + `', '` + marksField + `')
  if not f[1] then return end
  local i = redis.call('LLEN', KEYS[1]) - off
  local m = f[2] or ''
  local d = 0
  if m ~= '' then d = tonumber(string.match(m, '(%d+),%d+$', -48)) end
  while d and m ~= '' do
    local l = tonumber(string.match(m, ',(%d+)$', -48))
    if not l then
      d = nil
    elseif l < i then
      break
    else
      local sp = string.find(m, ' [^ ]*$', -48)
      m = sp and string.sub(m, 1, sp - 1) or ''
    end
  end
  if not d then
` + epochEndSrc + `
    return
  end
  if m ~= '' then m = m .. ' ' end
  m = m .. (d + 1) .. ',' .. i
  while #m > ` + maxMarksBytes + ` do
    local l1, d2, rest = string.match(m, '^%d+,(%d+) (%d+),%d+(.*)$')
    if not rest then break end
    m = d2 .. ',' .. l1 .. rest
  end
  redis.call('HSET', KEYS[2], '` + marksField + `', m)
end
`

// maxMarksBytes bounds the marks' text (some 200 marks of short numbers),
// as Lua source: a cursor is reported lost early only once it is older
// than that many pops at rising indices (see TestCursorLostEarlyBound).
const maxMarksBytes = "2000"

// nativePopSrc is popSrc recording the pop (the index removed is the
// list's length after it); KEYS[2] must be the metadata hash.
const nativePopSrc = recordPopFnSrc + popTakeSrc + `
record_pop(0)
` + popDoneSrc

// nativePopIfSrc is popIfSrc recording the pop, of the index m from the
// end.
const nativePopIfSrc = recordPopFnSrc + popIfCheckSrc + `
record_pop(m)
` + popIfDoneSrc

var (
	nativePopScript   = newScript(nativePopSrc)
	nativePopIfScript = newScript(nativePopIfSrc)
)

// popScript returns PopItem's script and its keys: in the native layout
// the script records the pop and needs the metadata hash; without a TTL
// the Python layout's touches the list only.
func (s *Session) popScript() (*script, []string) {
	switch {
	case s.st.opts.Layout == LayoutPython && s.st.ttlMS == 0:
		return popScript, s.keys[:1]
	case s.st.opts.Layout == LayoutPython:
		return popScript, s.all
	case s.st.ttlMS == 0:
		return nativePopScript, s.keys[:2]
	}
	return nativePopScript, s.all
}

const cursorPrefix = "r1:"

// position is what a native cursor holds.
type position struct {
	epoch string
	pops  int64
	r, x  int64 // records up to the last readable one given; records read past
}

// sessionTag names the session in its cursors, so that a cursor another
// session returned is refused rather than read as this one's.
func sessionTag(id string) string {
	h := uint32(2166136261) // FNV-1a, 32 bits
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return fmt.Sprintf("%08x", h)
}

func (s *Session) formatCursor(p position) session.Cursor {
	return session.Cursor(cursorPrefix + sessionTag(s.id) + ":" + p.epoch + ":" +
		strconv.FormatInt(p.pops, 10) + ":" + strconv.FormatInt(p.r, 10) + ":" + strconv.FormatInt(p.x, 10))
}

func (s *Session) parseCursor(c session.Cursor) (position, error) {
	if c == "" {
		return position{}, nil
	}
	invalid := fmt.Errorf("redis: %w: %q is not a cursor of session %q", session.ErrInvalidCursor, string(c), s.id)
	rest, ok := strings.CutPrefix(string(c), cursorPrefix+sessionTag(s.id)+":")
	f := strings.Split(rest, ":")
	if !ok || len(f) != 4 {
		return position{}, invalid
	}
	var n [3]int64
	for i, v := range f[1:] {
		k, err := strconv.ParseInt(v, 10, 64)
		if err != nil || k < 0 || v != strconv.FormatInt(k, 10) {
			return position{}, invalid
		}
		n[i] = k
	}
	p := position{epoch: f[0], pops: n[0], r: n[1], x: n[2]}
	if p.x < p.r || p.x == 0 || p.epoch == "" {
		return position{}, invalid
	}
	return p, nil
}

// newEpoch returns an epoch no other is (64 random bits).
func newEpoch() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// followState is the metadata ItemsSince checks a cursor against.
type followState struct {
	epoch string
	pops  int64
	marks string
}

// intact reports whether no record below index below changed since p:
// the same epoch, and every pop since removed an index at or above below.
func (st followState) intact(p position, below int64) bool {
	if st.epoch != p.epoch || st.pops < p.pops { // st.pops < 0: damaged
		return false
	}
	if st.pops == p.pops {
		return true
	}
	for _, m := range strings.Fields(st.marks) {
		ds, ls, ok := strings.Cut(m, ",")
		d, err1 := strconv.ParseInt(ds, 10, 64)
		l, err2 := strconv.ParseInt(ls, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return false // not what this package writes: assume the worst
		}
		if d > p.pops {
			return l >= below
		}
	}
	return false
}

// ItemsSince returns the items appended after cursor, oldest first, and
// the cursor after them (cursor itself when nothing is new), in one round
// trip (MULTI, HMGET of the metadata's follow fields, LRANGE from the
// cursor on, EXEC; with RefreshOnRead and a TTL, PEXPIRE of every key
// too) whose cost follows the records after the cursor, not the history;
// the first read of a session nobody followed yet takes one more, which
// starts its epoch. It returns session.ErrCursorLost when the history changed at or before
// the cursor (a pop of the last item read or below it, a clear, a
// replace, the session's expiry), and an error wrapping
// session.ErrInvalidCursor for a cursor no handle on this session
// returned. Unreadable records are skipped and reported once.
//
// In the Python layout it reads the whole history, as session.ReadSince
// does for a session without this method (see the package
// documentation).
func (s *Session) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	if s.st.opts.Layout == LayoutPython {
		return session.ReadSince(ctx, core{s}, cursor)
	}
	p, err := s.parseCursor(cursor)
	if err != nil {
		return nil, cursor, err
	}
	if err := s.begin(ctx); err != nil {
		return nil, cursor, err
	}
	st, raws, err := s.since(ctx, p.x, "")
	if err != nil {
		return nil, cursor, err
	}
	switch {
	case p.r > 0 && !st.intact(p, p.r):
		return nil, cursor, fmt.Errorf("redis: session %q: %w", s.id, session.ErrCursorLost)
	case p.x > 0 && !st.intact(p, p.x):
		// The cursor saw only unreadable records: nothing to lose, the
		// history is read from its start.
		p = position{}
		if st, raws, err = s.since(ctx, 0, ""); err != nil {
			return nil, cursor, err
		}
		if len(raws) == 0 {
			return nil, "", nil
		}
	}
	if len(raws) == 0 {
		return nil, cursor, nil
	}
	if st.epoch == "" {
		// Nobody follows the session yet (p is the zero cursor: any
		// other's epoch would differ): start an epoch, so that pops are
		// recorded from now on, and read again in the same step.
		if st, raws, err = s.since(ctx, p.x, newEpoch()); err != nil {
			return nil, cursor, err
		}
		if len(raws) == 0 {
			return nil, cursor, nil
		}
	}
	next := position{epoch: st.epoch, pops: st.pops, r: p.r, x: p.x + int64(len(raws))}
	items := make([]session.Item, 0, len(raws))
	var bad []driver.CorruptRecord
	var dec driver.Decoder
	dec.Expect(len(raws))
	for i, raw := range raws {
		it, derr := dec.DecodeString(raw)
		if derr != nil {
			bad = append(bad, driver.CorruptRecord{SessionID: s.id, Position: "index " + strconv.FormatInt(p.x+int64(i), 10), Raw: []byte(raw), Err: derr})
			continue
		}
		items = append(items, it)
		next.r = p.x + int64(i) + 1
	}
	slices.Reverse(bad) // report hands them over from the last
	s.report(ctx, bad)
	return items, s.formatCursor(next), nil
}

// since reads, in one MULTI/EXEC, the follow fields of the metadata and
// the records from index from on, having first started the epoch start
// unless the metadata holds one (HSETNX), when start is not empty.
func (s *Session) since(ctx context.Context, from int64, start string) (followState, []string, error) {
	var meta *goredis.SliceCmd
	var rng *goredis.StringSliceCmd
	_, err := s.st.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		if start != "" {
			p.HSetNX(ctx, s.keys[1], epochField, start)
		}
		meta = p.HMGet(ctx, s.keys[1], epochField, marksField)
		rng = p.LRange(ctx, s.keys[0], from, -1)
		if s.st.opts.RefreshOnRead && s.st.ttlMS > 0 {
			for _, k := range s.all {
				p.PExpire(ctx, k, s.TTL())
			}
		}
		return nil
	})
	if err != nil {
		return followState{}, nil, fmt.Errorf("redis: read session %q since a cursor: %w", s.id, err)
	}
	var st followState
	vals := meta.Val()
	if len(vals) == 2 {
		st.epoch, _ = vals[0].(string)
		st.marks, _ = vals[1].(string)
	}
	if i := strings.LastIndexByte(st.marks, ' '); st.marks != "" {
		ds, _, _ := strings.Cut(st.marks[i+1:], ",")
		n, perr := strconv.ParseInt(ds, 10, 64)
		if perr != nil || n < 0 {
			n = -1 // not what this package writes: every cursor is lost
		}
		st.pops = n
	}
	return st, rng.Val(), nil
}

// core is a Session with its core methods only, for session.ReadSince's
// fallback.
type core struct{ s *Session }

func (c core) SessionID() string                                 { return c.s.SessionID() }
func (c core) Items(ctx context.Context) ([]session.Item, error) { return c.s.Items(ctx) }
func (c core) AddItems(ctx context.Context, items []session.Item) error {
	return c.s.AddItems(ctx, items)
}
func (c core) PopItem(ctx context.Context) (session.Item, bool, error) { return c.s.PopItem(ctx) }
func (c core) Clear(ctx context.Context) error                         { return c.s.Clear(ctx) }

// Handle returns a handle on session id as a session.Session whose
// optional interfaces are exactly what its layout honours: the *Session
// of Session in the native layout, and in the Python layout a PythonSession,
// which is no session.Follower. The Python layout's ItemsSince cannot see
// a Python process pop an item and append one of the same bytes (Python's
// pop_item records nothing), which a Follower must report; without it,
// session.ReadSince uses its fallback, whose cursors say that they cannot.
// Probe (session.Probe, adapters.NewStore) a Handle, not a *Session.
func (st *Store) Handle(id string) (session.Session, error) {
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	if st.opts.Layout == LayoutPython {
		return PythonSession{Session: s}, nil
	}
	return s, nil
}

// PythonSession is a Python layout's *Session without ItemsSince: every
// other method, and so every other optional interface, is the Session's.
type PythonSession struct {
	*Session
	//lint:ignore U1000 present for its method, which hides the Session's
	notFollower
}

// notFollower's ItemsSince collides with the Session's at the same depth
// of PythonSession, so that neither is promoted: a PythonSession has no
// ItemsSince method, and no type assertion finds a session.Follower.
//
//lint:ignore U1000 present for its method, which hides the Session's
type notFollower struct{}

// ItemsSince is never promoted (see notFollower).
//
//lint:ignore U1000 never called: it hides the Session's
func (notFollower) ItemsSince() {}

// Unwrap returns the *Session.
func (p PythonSession) Unwrap() *Session { return p.Session }
