package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// since calls ItemsSince and requires it to succeed.
func since(t *testing.T, s *Session, c session.Cursor) ([]string, session.Cursor) {
	t.Helper()
	got, next, err := s.ItemsSince(context.Background(), c)
	require.NoError(t, err)
	return strs(got), next
}

// TestItemsSince: what follows the cursor, nothing when nothing is new
// (the cursor comes back unchanged), and ErrCursorLost after a pop of the
// cursor's item, a clear or a replace; a pop above the cursor is not a
// loss, and the zero cursor, or one taken on an empty history, never is.
func TestItemsSince(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, err := st.Session("f")
	require.NoError(t, err)

	got, c0 := since(t, s, "")
	require.Empty(t, got)
	require.Equal(t, session.Cursor(""), c0)
	require.NoError(t, s.Clear(ctx))
	got, c0 = since(t, s, c0)
	require.Empty(t, got, "a clear of an empty history loses nothing")

	v := numbered("v", 0, 5)
	require.NoError(t, s.AddItems(ctx, v[:3]))
	got, c1 := since(t, s, c0)
	require.Equal(t, strs(v[:3]), got)
	got, same := since(t, s, c1)
	require.Empty(t, got)
	require.Equal(t, c1, same)

	require.NoError(t, s.AddItems(ctx, v[3:]))
	got, c2 := since(t, s, c1)
	require.Equal(t, strs(v[3:]), got)

	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = s.ItemsSince(ctx, c2)
	require.ErrorIs(t, err, session.ErrCursorLost, "the cursor's item was popped")
	got, c3 := since(t, s, c1)
	require.Equal(t, strs(v[3:4]), got, "a pop above the cursor is not a loss")

	require.NoError(t, s.ReplaceItems(ctx, v[:4]))
	for _, c := range []session.Cursor{c1, c3} {
		_, _, err = s.ItemsSince(ctx, c)
		require.ErrorIs(t, err, session.ErrCursorLost, "a replace rewrote the history, even with the same items")
	}
	got, c4 := since(t, s, "")
	require.Equal(t, strs(v[:4]), got)
	require.NoError(t, s.Clear(ctx))
	require.NoError(t, s.AddItems(ctx, v[:1]))
	_, _, err = s.ItemsSince(ctx, c4)
	require.ErrorIs(t, err, session.ErrCursorLost, "a clear, even after new appends")

	// Pops down to the cursor's item, then of it.
	got, c5 := since(t, s, "")
	require.Equal(t, strs(v[:1]), got)
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
	st := openStore(t, Options{})
	a, _ := st.Session("a")
	b, _ := st.Session("b")
	require.NoError(t, a.AddItems(ctx, numbered("a", 0, 2)))
	require.NoError(t, b.AddItems(ctx, numbered("b", 0, 2)))
	_, ca := since(t, a, "")
	_, cb := since(t, b, "")
	tag := session.Cursor(cursorPrefix + sessionTag("a") + ":")
	for _, c := range []session.Cursor{
		cb, "garbage", "p1:", tag, tag + "1", tag + "1,,1,", tag + "x,2026-01-01T00:00:00.000000,1,2026-01-01T00:00:00.000000",
		tag + "1,2026-01-01 00:00:00,1,2026-01-01 00:00:00", tag + "1,2026-13-01T00:00:00.000000,1,2026-13-01T00:00:00.000000",
		tag + "2,2026-01-01T00:00:00.000000,1,2026-01-01T00:00:00.000000", tag + "1,2026-01-01T00:00:00.000000,0,",
		tag + "-1,2026-01-01T00:00:00.000000,-1,2026-01-01T00:00:00.000000",
		"h1:0:00000000000000000000000000000000", session.Cursor(strings.Replace(string(ca), "p1:", "p2:", 1)),
	} {
		got, next, err := a.ItemsSince(ctx, c)
		require.ErrorIs(t, err, session.ErrInvalidCursor, "%q", c)
		require.Nil(t, got)
		require.Equal(t, c, next)
	}
	other, err := st.Session("a")
	require.NoError(t, err)
	got, _ := since(t, other, ca)
	require.Empty(t, got, "another handle on a takes a's cursor")
}

// TestItemsSinceCorrupt: a corrupt row is skipped and reported once, the
// cursor moves past it, and a pop (which leaves it and removes the newest
// valid item) still loses the cursor.
func TestItemsSinceCorrupt(t *testing.T) {
	ctx := context.Background()
	log := &driver.CorruptLog{}
	st := openStore(t, Options{OnCorrupt: log.Handler()})
	s, _ := st.Session("u")
	v := numbered("v", 0, 2)
	require.NoError(t, s.AddItems(ctx, v[:1]))
	require.NoError(t, st.AppendRaw(ctx, "u", []byte("unreadable")))
	got, c := since(t, s, "")
	require.Equal(t, strs(v[:1]), got)
	require.Len(t, log.Reports("u"), 1)
	got, same := since(t, s, c)
	require.Empty(t, got)
	require.Equal(t, c, same)
	require.Len(t, log.Reports("u"), 1, "reported once")
	require.NoError(t, s.AddItems(ctx, v[1:]))
	got, c2 := since(t, s, c)
	require.Equal(t, strs(v[1:]), got)
	_, _, err := s.PopItem(ctx)
	require.NoError(t, err)
	_, _, err = s.ItemsSince(ctx, c2)
	require.ErrorIs(t, err, session.ErrCursorLost)
	_, _, err = s.PopItem(ctx)
	require.NoError(t, err)
	_, _, err = s.ItemsSince(ctx, c)
	require.ErrorIs(t, err, session.ErrCursorLost, "the pop went past the corrupt row to the cursor's item")
	require.Equal(t, []string{"unreadable"}, rawRows(t, st, "u"))
}

// TestItemsSinceUsesIndex: on a 10k-item session among many others, the
// read walks the (session_id, created_at, id) index forwards from the
// cursor, with no sort, in custom and generic plans.
func TestItemsSinceUsesIndex(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	c := planConn(t, st,
		`INSERT INTO `+st.q.sessions+` (session_id) SELECT 's' || g FROM generate_series(1, 500) AS g`,
		`INSERT INTO `+st.q.messages+` (session_id, message_data, created_at) SELECT 's7', '{}', timestamp '2026-01-01' + (g / 20) * interval '1 second' FROM generate_series(1, 10000) AS g`,
		`INSERT INTO `+st.q.messages+` (session_id, message_data) SELECT 's' || (g % 500 + 1), '{}' FROM generate_series(1, 5000) AS g`,
		`ANALYZE `+st.q.messages)
	for _, mode := range planModes {
		_, err := c.Exec(ctx, `SET plan_cache_mode = `+mode)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `PREPARE since(text, timestamp, bigint, bigint) AS `+st.q.since)
		require.NoError(t, err)
		for _, from := range []string{`'2026-01-01 00:08:19', 9996, 1000`, `'-infinity', -9223372036854775808, 1000`} {
			text := explainText(t, c, `EXPLAIN EXECUTE since('s7', `+from+`)`)
			t.Logf("%s, from %s:\n%s", mode, from, text)
			require.Contains(t, text, "Index Scan using "+st.q.orderIndex)
			require.NotContains(t, text, "Sort")
			require.NotContains(t, text, "Seq Scan")
		}
		_, err = c.Exec(ctx, `DEALLOCATE since`)
		require.NoError(t, err)
	}
	_, err := c.Exec(ctx, `RESET plan_cache_mode`)
	require.NoError(t, err)

	s, _ := st.Session("s7")
	all, err := s.Items(ctx)
	require.NoError(t, err)
	var at string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT to_char(created_at, '`+cursorTimeFormat+`') FROM `+st.q.messages+` WHERE id = 9996`).Scan(&at))
	got, _ := since(t, s, formatCursor("s7", position{rID: 9996, rAt: at, xID: 9996, xAt: at}))
	require.Equal(t, strs(all[9996:]), got, "the newest 4, in Items' order")
	got, _ = since(t, s, "")
	require.Equal(t, strs(all), got, "the whole history from the zero cursor, page after page")
}

// TestFollowBesideGoWriters: a follower polling while writers of two
// Stores (two pools, as two processes) append reads every item exactly
// once, in Items' order: a batch of this package always sorts after what
// a follower has read.
func TestFollowBesideGoWriters(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	peer := openStore(t, Options{Schema: st.opts.Schema})
	s, _ := st.Session("live")
	const writers, batches = 4, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			on := st
			if w%2 == 1 {
				on = peer
			}
			ws, _ := on.Session("live")
			for b := range batches {
				if err := ws.AddItems(ctx, numbered(fmt.Sprintf("w%d.%d", w, b), 0, 2)); err != nil {
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
	require.Equal(t, strs(all), read)
}

// TestAddItemsOnce: a second call with an operation id appends nothing;
// the id survives pop, replace and clear, and RemoveSession forgets it;
// an empty batch records it; an empty id is refused.
func TestAddItemsOnce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, _ := st.Session("o")
	v := numbered("v", 0, 3)

	_, err := s.AddItemsOnce(ctx, "", v[:1])
	require.ErrorIs(t, err, session.ErrInvalidOperationID)
	ok, err := s.AddItemsOnce(ctx, "op1", v[:2])
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.AddItemsOnce(ctx, "op1", v[:2])
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, strs(v[:2]), rawRows(t, st, "o"))
	other, _ := st.Session("other")
	ok, err = other.AddItemsOnce(ctx, "op1", v[:1])
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
		require.NoError(t, c.change(), c.name)
		ok, err = s.AddItemsOnce(ctx, "op1", v[:2])
		require.NoError(t, err)
		require.False(t, ok, "the id survives %s", c.name)
	}
	require.Empty(t, rawRows(t, st, "o"))

	require.NoError(t, st.RemoveSession(ctx, "o"))
	ok, err = s.AddItemsOnce(ctx, "op1", v[:2])
	require.NoError(t, err)
	require.True(t, ok, "RemoveSession forgot the id")
	require.Equal(t, strs(v[:2]), rawRows(t, st, "o"))
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM `+st.q.ops.table+` WHERE session_id = 'other'`).Scan(&n))
	require.Equal(t, 1, n, "another session's ids stay")

	// Ids PostgreSQL's text cannot hold are stored escaped, as session ids are.
	ok, err = s.AddItemsOnce(ctx, "a\x00b", v[:1])
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.AddItemsOnce(ctx, "a\x00b", v[:1])
	require.NoError(t, err)
	require.False(t, ok)
}

// TestAddItemsOnceConcurrent: concurrent calls with one id, from two
// Stores, append exactly once.
func TestAddItemsOnceConcurrent(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	peer := openStore(t, Options{Schema: st.opts.Schema})
	const n = 8
	var wg sync.WaitGroup
	results := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			on := st
			if i%2 == 1 {
				on = peer
			}
			s, _ := on.Session("c")
			<-start
			results[i], errs[i] = s.AddItemsOnce(ctx, "same", numbered("once", 0, 3))
		}()
	}
	close(start)
	wg.Wait()
	appended := 0
	for i, ok := range results {
		require.NoError(t, errs[i])
		if ok {
			appended++
		}
	}
	require.Equal(t, 1, appended, "exactly one call appended")
	require.Equal(t, strs(numbered("once", 0, 3)), rawRows(t, st, "c"))
}

// TestAddItemsOnceOutcomeUnknown: an append whose commit outlives its
// deadline is ErrOutcomeUnknown; a retry with the same id then appends if
// and only if the first did not land, and the batch is there once. A
// batch the server refused records no id.
func TestAddItemsOnceOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	stallCommits(t, st)
	s, _ := st.Session("outcome")
	batch := []session.Item{item(`{"stall":1}`), item(`{"n":2}`)}
	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ok, err := s.AddItemsOnce(c, "op", batch)
	cancel()
	require.ErrorIs(t, err, session.ErrOutcomeUnknown, "%v", err)
	require.False(t, ok)
	settle(t, st)
	landed := len(rawRows(t, st, s.id)) > 0
	t.Logf("the first call landed: %v", landed)
	ok, err = s.AddItemsOnce(ctx, "op", batch)
	require.NoError(t, err)
	require.Equal(t, !landed, ok, "the retry appends if and only if the first call did not")
	require.Equal(t, strs(batch), rawRows(t, st, s.id), "the batch is there once")

	_, err = s.AddItemsOnce(ctx, "refused", []session.Item{item(`{"refuse":1}`)})
	require.ErrorContains(t, err, "refused by the test")
	require.False(t, errors.Is(err, session.ErrOutcomeUnknown), "%v", err)
	ok, err = s.AddItemsOnce(ctx, "refused", nil)
	require.NoError(t, err)
	require.True(t, ok, "the refused batch recorded no id")
}

// TestOperationsTable: the table is created with the others, named after
// the messages table, and in a database whose other tables exist (one of
// Python's); SkipCreateTables creates nothing and AddItemsOnce then fails
// with ErrNoSchema.
func TestOperationsTable(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{MessagesTable: "m2", SessionsTable: "s2"})
	var reg *string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT to_regclass($1)::text`, quote(st.opts.Schema)+`."m2_operations"`).Scan(&reg))
	require.NotNil(t, reg)

	schema := freshSchema(t)
	conn := connect(t)
	pyCreateTables(t, conn, schema)
	skip := openStore(t, Options{Schema: schema, SkipCreateTables: true})
	s, _ := skip.Session("x")
	_, err := s.AddItemsOnce(ctx, "op", numbered("v", 0, 1))
	require.ErrorIs(t, err, ErrNoSchema)
	py := openStore(t, Options{Schema: schema})
	require.NoError(t, py.Pool().QueryRow(ctx, `SELECT to_regclass($1)::text`, quote(schema)+`."agent_messages_operations"`).Scan(&reg))
	require.NotNil(t, reg, "a read-write open adds it beside Python's tables")
	s, _ = py.Session("x")
	ok, err := s.AddItemsOnce(ctx, "op", numbered("v", 0, 1))
	require.NoError(t, err)
	require.True(t, ok)
}

// TestFollowBesidePythonLateCommit pins what the package documentation
// says a follower may miss: a Python batch (created_at from its
// transaction's start) that commits after a follower read past that time
// sorts before the cursor. The follower is not told (nothing it read was
// removed); Items and the zero cursor show the row, before the Go batch.
func TestFollowBesidePythonLateCommit(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, _ := st.Session("late")
	require.NoError(t, s.AddItems(ctx, numbered("go", 0, 1)))
	py := connect(t)
	tx, err := py.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT CURRENT_TIMESTAMP`) // the transaction, and its timestamp, begin
	require.NoError(t, err)

	require.NoError(t, s.AddItems(ctx, numbered("go", 1, 2)))
	got, c := since(t, s, "")
	require.Equal(t, strs(numbered("go", 0, 2)), got)
	_, err = tx.Exec(ctx, `INSERT INTO `+st.q.messages+` (session_id, message_data) VALUES ('late', '{"n":"python"}')`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	got, _ = since(t, s, c)
	require.Empty(t, got, "the late Python row sorts before the cursor")
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"n":"go-0"}`, `{"n":"python"}`, `{"n":"go-1"}`}, strs(all))
	got, _ = since(t, s, "")
	require.Equal(t, strs(all), got)
}
