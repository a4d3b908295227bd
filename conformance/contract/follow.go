package contract

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// follower reads one session with session.ReadSince through wrap (nil: as
// the store gives it), failing the clause on an error.
type follower struct {
	c    *suite.C
	wrap func(session.Session) session.Session
}

func (f follower) since(s session.Session, cur session.Cursor) ([]session.Item, session.Cursor, error) {
	if f.wrap != nil {
		s = f.wrap(s)
	}
	return session.ReadSince(f.c.Context(), s, cur)
}

// read returns what s has after cur, requiring want, and the new cursor.
func (f follower) read(s session.Session, cur session.Cursor, want []session.Item, msgAndArgs ...any) session.Cursor {
	f.c.Helper()
	got, next, err := f.since(s, cur)
	require.NoError(f.c, err, msgAndArgs...)
	requireItems(f.c, want, got, msgAndArgs...)
	if len(want) == 0 {
		require.Equal(f.c, cur, next, "nothing new gives the same cursor")
	}
	return next
}

// lost requires cur to be reported lost on s, with nothing read.
func (f follower) lost(s session.Session, cur session.Cursor, msgAndArgs ...any) {
	f.c.Helper()
	got, _, err := f.since(s, cur)
	require.ErrorIs(f.c, err, session.ErrCursorLost, msgAndArgs...)
	require.Empty(f.c, got, msgAndArgs...)
}

func pop(c *suite.C, s session.Session, want session.Item) {
	c.Helper()
	got, ok, err := s.PopItem(c.Context())
	require.NoError(c, err)
	require.True(c, ok)
	requireItems(c, []session.Item{want}, []session.Item{got})
}

// followSemantics checks ReadSince through wrap (nil: the store's own
// Follower): the zero cursor reads everything, a cursor reads exactly what
// came after it, on any Session of the id; pops of unseen items are not
// reported; a pop of a seen item, a clear and a replace are; a garbage
// cursor is invalid; a cursor of another session never reads wrong items.
func followSemantics(c *suite.C, wrap func(session.Session) session.Session) {
	f := follower{c, wrap}
	id := c.ID("follow")
	s, again, p := c.Open(id), c.Open(id), c.OpenPeer(id)
	a, b, x, y, z := numbered("a", 3), numbered("b", 2), numbered("x", 2), numbered("y", 1), numbered("z", 1)

	c0 := f.read(s, "", nil, "an empty session")
	require.Equal(c, session.Cursor(""), c0, "nothing new from the zero cursor: the zero cursor")
	add(c, s, a)
	c1 := f.read(s, c0, a, "the zero cursor reads the whole history")
	f.read(s, c1, nil, "nothing new after a read")
	add(c, p, b)
	c2 := f.read(again, c1, b, "a peer's append, read through a second Session with the first one's cursor")
	f.read(p, c2, nil, "the cursor works on the peer too")

	add(c, p, x)
	pop(c, s, x[1])
	c3 := f.read(s, c2, x[:1], "a pop of an item never read is not reported")
	add(c, s, y)
	pop(c, p, y[0])
	f.read(s, c3, nil, "a pop of an item never read is not reported")
	add(c, s, z)
	c4 := f.read(s, c3, z, "an append after a pop of an item never read")

	pop(c, s, z[0])
	f.lost(s, c4, "a pop of the last item read")
	add(c, p, numbered("w", 1))
	f.lost(s, c4, "a pop of the last item read, then an append")
	f.lost(p, c4, "a pop of the last item read, on the peer")
	history := slices.Concat(a, b, x[:1], numbered("w", 1))
	c5 := f.read(s, "", history, "the zero cursor reads the history again")
	pop(c, s, history[6])
	pop(c, s, history[5])
	f.read(s, c2, nil, "pops after the cursor are not reported")
	pop(c, p, history[4])
	f.lost(s, c2, "a pop of the last item read")
	f.lost(s, c5, "a pop below the cursor")
	history = history[:4]

	c6 := f.read(s, "", history)
	require.NoError(c, s.Clear(c.Context()))
	f.lost(s, c6, "a clear")
	add(c, p, numbered("n", 4))
	f.lost(s, c6, "a clear, then more items than the cursor covers")
	c7 := f.read(s, "", numbered("n", 4))
	require.NoError(c, session.Replace(c.Context(), s, numbered("r", 2)))
	f.lost(s, c7, "a replace")
	c8 := f.read(p, "", numbered("r", 2))
	f.read(s, c8, nil, "the peer's cursor after the replace works here")

	for _, bad := range []session.Cursor{"not a cursor", "\x00\xff"} {
		got, _, err := f.since(s, bad)
		require.ErrorIs(c, err, session.ErrInvalidCursor, "the garbage cursor %q", bad)
		require.Empty(c, got)
	}

	other := c.Fresh("follow-other")
	add(c, other, numbered("o", 4))
	co := f.read(other, "", numbered("o", 4))
	got, next, err := f.since(s, co)
	if err != nil {
		require.True(c, errors.Is(err, session.ErrCursorLost) || errors.Is(err, session.ErrInvalidCursor),
			"another session's cursor is lost or invalid here, not %v", err)
		return
	}
	// If a cursor is not tied to its session, it must still read only
	// what this history has after some position.
	h := all(c, s)
	require.True(c, len(got) <= len(h) && slices.Equal(suite.Texts(got), suite.Texts(h[len(h)-len(got):])),
		"another session's cursor read %v, not the end of this history %v", suite.Texts(got), suite.Texts(h))
	f.read(s, next, nil, "the cursor returned for another session's cursor")
}

// clauseFollowEqualRewrite: a Follower's cursor is lost once the item it
// names is gone, even if equal items, byte for byte, took its place (what
// session.Follower promises and ReadSince's fallback cannot tell): a pop
// of the last item read and an append of the same bytes, by another
// handle; a clear and the same history again; a replace by the same
// history.
func clauseFollowEqualRewrite(c *suite.C) {
	f := follower{c, nil}
	id := c.ID("follow-equal")
	s, p := c.Open(id), c.OpenPeer(id)
	a := numbered("e", 3)
	add(c, s, a)
	c1 := f.read(s, "", a)
	pop(c, p, a[2])
	add(c, p, a[2:])
	f.lost(s, c1, "a pop of the last item read, then an append of the same bytes")
	c2 := f.read(s, "", a)
	require.NoError(c, p.Clear(c.Context()))
	add(c, p, a)
	f.lost(s, c2, "a clear, then the same history again")
	c3 := f.read(s, "", a)
	pop(c, p, a[2])
	pop(c, p, a[1])
	add(c, p, a[1:])
	f.lost(s, c3, "two pops, the last item read among them, then appends of the same bytes")
	c4 := f.read(s, "", a)
	require.NoError(c, session.Replace(c.Context(), p, a))
	f.lost(s, c4, "a replace by the same history")
}

// Beside-writers shape: writers append this many batches of two while a
// follower reads what is new, at least followPolls times.
const (
	followWriters = 3
	followBatches = 40
	followPolls   = 50
)

// clauseFollowBesideWriters follows a session while peers append to it:
// what the follower read, concatenated, must be the final history, every
// item once and in order. A store whose appends become visible out of the
// order of their positions (a later one first) lets a cursor pass an
// earlier one, which is then never read.
func clauseFollowBesideWriters(c *suite.C) {
	f := follower{c, nil}
	id := c.ID("follow-writers")
	s := c.Open(id)
	var polls atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, followWriters)
	for w := 0; w < followWriters; w++ {
		p := c.OpenPeer(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < followBatches || polls.Load() < followPolls && b < 20*followBatches; b++ {
				if err := p.AddItems(c.Context(), numbered(fmt.Sprintf("w%d.%d", w, b), 2)); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var read []session.Item
	var cur session.Cursor
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true // one more read after the last append
		default:
		}
		got, next, err := f.since(s, cur)
		require.NoError(c, err, "a follower beside appends, after %d polls", polls.Load())
		read, cur = append(read, got...), next
		polls.Add(1)
	}
	close(errs)
	for err := range errs {
		c.Fatalf("%v", err)
	}
	final := all(c, s)
	require.Equal(c, suite.Texts(final), suite.Texts(read),
		"what the follower read in %d polls is the history, every item once, in order", polls.Load())
}
