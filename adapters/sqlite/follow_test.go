package sqlite

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// since calls ItemsSince and requires it to succeed.
func since(t *testing.T, s *Session, c session.Cursor) ([]string, session.Cursor) {
	t.Helper()
	got, next, err := s.ItemsSince(context.Background(), c)
	require.NoError(t, err)
	return texts(got), next
}

// TestItemsSince: what follows the cursor, nothing when nothing is new
// (the cursor comes back unchanged), and ErrCursorLost after a pop of the
// cursor's item, a clear or a replace; a pop above the cursor is not a
// loss, and the zero cursor, or one taken on an empty history, never is.
func TestItemsSince(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "f")

	got, c0 := since(t, s, "")
	require.Empty(t, got)
	require.Equal(t, session.Cursor(""), c0, "an empty history: the zero cursor back")
	require.NoError(t, s.Clear(ctx))
	got, c0 = since(t, s, c0)
	require.Empty(t, got, "a clear of an empty history loses nothing")

	v := numbered("v", 5)
	require.NoError(t, s.AddItems(ctx, v[:3]))
	got, c1 := since(t, s, c0)
	require.Equal(t, texts(v[:3]), got)
	got, same := since(t, s, c1)
	require.Empty(t, got)
	require.Equal(t, c1, same)

	require.NoError(t, s.AddItems(ctx, v[3:]))
	got, c2 := since(t, s, c1)
	require.Equal(t, texts(v[3:]), got)

	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = s.ItemsSince(ctx, c2)
	require.ErrorIs(t, err, session.ErrCursorLost, "the cursor's item was popped")
	got, c3 := since(t, s, c1)
	require.Equal(t, texts(v[3:4]), got, "a pop above the cursor is not a loss")
	got, _ = since(t, s, "")
	require.Equal(t, texts(v[:4]), got)

	require.NoError(t, s.ReplaceItems(ctx, v[:4]))
	for _, c := range []session.Cursor{c1, c3} {
		_, _, err = s.ItemsSince(ctx, c)
		require.ErrorIs(t, err, session.ErrCursorLost, "a replace rewrote the history, even with the same items")
	}
	got, c4 := since(t, s, "")
	require.Equal(t, texts(v[:4]), got)
	require.NoError(t, s.Clear(ctx))
	_, _, err = s.ItemsSince(ctx, c4)
	require.ErrorIs(t, err, session.ErrCursorLost, "a clear")
	require.NoError(t, s.AddItems(ctx, v[:1]))
	_, _, err = s.ItemsSince(ctx, c4)
	require.ErrorIs(t, err, session.ErrCursorLost, "and a clear stays a loss after new appends")

	// A pop of every item down to the cursor's, then the cursor's own.
	got, c5 := since(t, s, "")
	require.Equal(t, texts(v[:1]), got)
	require.NoError(t, s.AddItems(ctx, v[1:3]))
	for range 2 {
		_, _, err := s.PopItem(ctx)
		require.NoError(t, err)
	}
	got, _ = since(t, s, c5)
	require.Empty(t, got)
	_, _, err = s.PopItem(ctx)
	require.NoError(t, err)
	_, _, err = s.ItemsSince(ctx, c5)
	require.ErrorIs(t, err, session.ErrCursorLost)
}

// TestItemsSinceInvalidCursor: garbage, another session's cursor and the
// fallback's cursors are ErrInvalidCursor, and nothing is read.
func TestItemsSinceInvalidCursor(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a, b := f.session(t, "a"), f.session(t, "b")
	require.NoError(t, a.AddItems(ctx, numbered("a", 2)))
	require.NoError(t, b.AddItems(ctx, numbered("b", 2)))
	_, ca := since(t, a, "")
	_, cb := since(t, b, "")
	tag := session.Cursor(sessionTag("a"))
	for _, c := range []session.Cursor{
		cb, "garbage", "s1:", "s1:" + tag, "s1:" + tag + ":", "s1:" + tag + ":x", "s1:" + tag + ":-1",
		"s1:" + tag + ":01", "s1:" + tag + ":5:3", "s1:" + tag + ":1:2:3", "a1:" + tag + ":1:1:1",
		"h1:0:00000000000000000000000000000000", session.Cursor(strings.Replace(string(ca), "s1:", "s2:", 1)),
	} {
		got, next, err := a.ItemsSince(ctx, c)
		require.ErrorIs(t, err, session.ErrInvalidCursor, "%q", c)
		require.Nil(t, got)
		require.Equal(t, c, next)
	}
	got, _ := since(t, a, ca)
	require.Empty(t, got, "a's own cursor is fine")
	other, err := f.st.Session("a")
	require.NoError(t, err)
	got, _ = since(t, other, ca)
	require.Empty(t, got, "and so is it on another handle on a")
}

// TestItemsSinceUnreadable: an unreadable row is skipped and reported
// once, the cursor moves past it, and a pop (which leaves it in place and
// removes the newest readable item) still loses the cursor.
func TestItemsSinceUnreadable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "u")
	v := numbered("v", 3)
	require.NoError(t, s.AddItems(ctx, v[:1]))
	require.NoError(t, insertRaw(ctx, f.st, "u", []byte("unreadable")))
	got, c := since(t, s, "")
	require.Equal(t, texts(v[:1]), got)
	require.Len(t, f.corrupt.Reports("u"), 1)
	got, same := since(t, s, c)
	require.Empty(t, got)
	require.Equal(t, c, same)
	require.Len(t, f.corrupt.Reports("u"), 1, "reported once")

	require.NoError(t, s.AddItems(ctx, v[1:]))
	got, c2 := since(t, s, c)
	require.Equal(t, texts(v[1:]), got)
	_, _, err := s.PopItem(ctx)
	require.NoError(t, err)
	_, _, err = s.PopItem(ctx)
	require.NoError(t, err)
	_, _, err = s.ItemsSince(ctx, c2)
	require.ErrorIs(t, err, session.ErrCursorLost)
	got, _ = since(t, s, c)
	require.Empty(t, got, "the unreadable row stays; the first cursor's item too")
	_, _, err = s.PopItem(ctx)
	require.NoError(t, err)
	_, _, err = s.ItemsSince(ctx, c)
	require.ErrorIs(t, err, session.ErrCursorLost, "the pop went past the unreadable row to the cursor's item")
	require.Equal(t, []string{"unreadable"}, rawRows(t, f.st, "u"))

	// A cursor that has seen only unreadable rows has nothing to lose.
	w := f.session(t, "w")
	require.NoError(t, insertRaw(ctx, f.st, "w", []byte("bad")))
	got, cw := since(t, w, "")
	require.Empty(t, got)
	require.NotEqual(t, session.Cursor(""), cw, "past the unreadable row")
	require.NoError(t, w.AddItems(ctx, v[:1]))
	got, _ = since(t, w, cw)
	require.Equal(t, texts(v[:1]), got)
	require.Len(t, f.corrupt.Reports("w"), 1)
}

// TestItemsSinceQueryPlan: on a 10k-item session among others, the read
// is a range of the (session_id, id) index: no scan of the table, no sort.
func TestItemsSinceQueryPlan(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	fill(t, f.st.DB(), "big", 10000)
	fill(t, f.st.DB(), "other", 1000)
	rows, err := f.st.DB().QueryContext(ctx, `EXPLAIN QUERY PLAN `+f.st.q.fq.since, "big", 9996)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, closeRows(rows))
	t.Logf("plan: %q", plan)
	require.Len(t, plan, 1)
	require.Contains(t, plan[0], "SEARCH agent_messages USING INDEX idx_agent_messages_session_id (session_id=? AND id>?)")
	for _, p := range plan {
		require.NotContains(t, p, "SCAN")
		require.NotContains(t, p, "TEMP B-TREE")
	}
	s := f.session(t, "big")
	all, err := s.Items(ctx)
	require.NoError(t, err)
	got, _ := since(t, s, f.st.q.fq.format("big", position{r: 9996, rID: 9996, x: 9996}))
	require.Equal(t, texts(all[9996:]), got, "the newest 4, in Items' order")
}

// TestAddItemsOnce: a second call with an operation id appends nothing;
// the id survives pop, clear and replace, and RemoveSession forgets it;
// an empty batch records it; an empty id is refused.
func TestAddItemsOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "o")
	v := numbered("v", 3)

	_, err := s.AddItemsOnce(ctx, "", v[:1])
	require.ErrorIs(t, err, session.ErrInvalidOperationID)
	ok, err := s.AddItemsOnce(ctx, "op1", v[:2])
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.AddItemsOnce(ctx, "op1", v[:2])
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, texts(v[:2]), rawRows(t, f.st, "o"))

	ok, err = f.session(t, "other").AddItemsOnce(ctx, "op1", v[:1])
	require.NoError(t, err)
	require.True(t, ok, "operation ids are per session")

	ok, err = s.AddItemsOnce(ctx, "empty", nil)
	require.NoError(t, err)
	require.True(t, ok, "an empty batch records its id")
	ok, err = s.AddItemsOnce(ctx, "empty", v[2:])
	require.NoError(t, err)
	require.False(t, ok)

	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"pop", func() error { _, _, err := s.PopItem(ctx); return err }},
		{"replace", func() error { return s.ReplaceItems(ctx, v[:1]) }},
		{"clear", func() error { return s.Clear(ctx) }},
	} {
		name := c.name
		require.NoError(t, c.change(), name)
		ok, err = s.AddItemsOnce(ctx, "op1", v[:2])
		require.NoError(t, err)
		require.False(t, ok, "the id survives %s", name)
	}
	require.Empty(t, rawRows(t, f.st, "o"))

	require.NoError(t, f.st.RemoveSession(ctx, "o"))
	ok, err = s.AddItemsOnce(ctx, "op1", v[:2])
	require.NoError(t, err)
	require.True(t, ok, "RemoveSession forgot the id")
	require.Equal(t, texts(v[:2]), rawRows(t, f.st, "o"))
	var n int
	require.NoError(t, f.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM agent_messages_operations WHERE session_id = 'other'`).Scan(&n))
	require.Equal(t, 1, n, "another session's ids stay")
}

// TestAddItemsOnceConcurrent: concurrent calls with one id, alone or all
// in one group transaction, append exactly once, and a duplicate does not
// fail the rest of its group.
func TestAddItemsOnceConcurrent(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			s := f.session(t, "c")
			const n = 8
			var release func()
			if grouped {
				release = holdLock(t, f.path)
			}
			tx0, _ := f.st.Stats()
			var wg sync.WaitGroup
			results := make([]bool, n)
			errs := make([]error, n+1)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = s.AddItemsOnce(ctx, "same", numbered("once", 3))
				}()
				if grouped {
					waitQueued(t, f.st, i+1)
				}
			}
			wg.Add(1)
			go func() { defer wg.Done(); errs[n] = f.session(t, "d").AddItems(ctx, numbered("d", 1)) }()
			if grouped {
				waitQueued(t, f.st, n+1)
				release()
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "call %d", i)
			}
			appended := 0
			for _, ok := range results {
				if ok {
					appended++
				}
			}
			require.Equal(t, 1, appended, "exactly one call appended")
			require.Equal(t, texts(numbered("once", 3)), rawRows(t, f.st, "c"))
			require.Equal(t, texts(numbered("d", 1)), rawRows(t, f.st, "d"))
			if grouped {
				tx1, _ := f.st.Stats()
				require.Equal(t, int64(1), tx1-tx0, "one group transaction carried them all")
			}
		})
	}
}

// TestAddItemsOnceFailedBatch: a batch that fails records no id: a retry
// appends.
func TestAddItemsOnceFailedBatch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	_, err := f.st.DB().ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON agent_messages
        WHEN NEW.message_data = '{"refuse":1}' BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`)
	require.NoError(t, err)
	s := f.session(t, "r")
	_, err = s.AddItemsOnce(ctx, "op", items(t, `{"ok":1}`, `{"refuse":1}`))
	require.ErrorContains(t, err, "refused by the test trigger")
	ok, err := s.AddItemsOnce(ctx, "op", items(t, `{"ok":1}`))
	require.NoError(t, err)
	require.True(t, ok, "the failed batch recorded nothing")
	require.Equal(t, []string{`{"ok":1}`}, rawRows(t, f.st, "r"))
}

// TestOperationsTable: the table is created with the others, named after
// the messages table, and in a database whose other tables exist; a
// read-only store, or one with SkipCreateTables, creates nothing and
// refuses AddItemsOnce.
func TestOperationsTable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	require.True(t, tableOf(t, f.st, "agent_messages_operations"))
	custom := openStore(t, f.path, Options{SessionsTable: "s2", MessagesTable: "m2"})
	require.True(t, tableOf(t, custom, "m2_operations"))

	_, err := f.st.DB().ExecContext(ctx, `DROP TABLE agent_messages_operations`)
	require.NoError(t, err)
	ro := openStore(t, f.path, Options{ReadOnly: true})
	s, err := ro.Session("x")
	require.NoError(t, err)
	_, err = s.AddItemsOnce(ctx, "op", numbered("v", 1))
	require.ErrorIs(t, err, ErrReadOnly)
	require.False(t, tableOf(t, f.st, "agent_messages_operations"), "read-only created nothing")
	skip := openStore(t, f.path, Options{SkipCreateTables: true})
	s, err = skip.Session("x")
	require.NoError(t, err)
	_, err = s.AddItemsOnce(ctx, "op", numbered("v", 1))
	require.ErrorIs(t, err, ErrNoSchema)
	require.Empty(t, rawRows(t, f.st, "x"), "nothing of the batch either")
	require.False(t, tableOf(t, f.st, "agent_messages_operations"), "SkipCreateTables created nothing")
	again := openStore(t, f.path, Options{})
	require.True(t, tableOf(t, again, "agent_messages_operations"), "a read-write open creates it beside the others")
}

// TestFollowBesideWriters: a follower polling while writers append reads
// every item exactly once, in Items' order.
func TestFollowBesideWriters(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "live")
	const writers, batches = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := s.AddItems(ctx, numbered(fmt.Sprintf("w%d.%d", w, b), 2)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var read []string
	var c session.Cursor
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		got, next := since(t, s, c)
		read, c = append(read, got...), next
	}
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, all, writers*batches*2)
	require.Equal(t, texts(all), read)
}
