package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func item(s string) session.Item { return session.MustItem(s) }

func strs(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func numbered(tag string, from, to int) []session.Item {
	var out []session.Item
	for i := from; i < to; i++ {
		out = append(out, item(fmt.Sprintf(`{"n":"%s-%d"}`, tag, i)))
	}
	return out
}

// rawRows returns message_data of the session's rows, by id, read with SQL.
func rawRows(t *testing.T, st *Store, id string) []string {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(),
		`SELECT message_data FROM `+st.q.messages+` WHERE session_id = $1 ORDER BY id`, storedID(id))
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestPopConcurrent pops one session empty from 2 Stores (2 pools, as 2
// processes) x 8 goroutines: every item is popped exactly once, and each
// goroutine sees its pops newest first.
func TestPopConcurrent(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	a := openStore(t, Options{Schema: schema})
	b := openStore(t, Options{Schema: schema})
	const n = 400
	s, err := a.Session("pops")
	require.NoError(t, err)
	want := numbered("p", 0, n)
	require.NoError(t, s.AddItems(ctx, want))

	index := map[string]int{}
	for i, it := range want {
		index[it.String()] = i
	}
	var (
		mu     sync.Mutex
		popped = map[string]int{}
		wg     sync.WaitGroup
		errs   = make(chan error, 16)
	)
	for g := range 16 {
		st := a
		if g%2 == 1 {
			st = b
		}
		wg.Go(func() {
			h, err := st.Session("pops")
			if err != nil {
				errs <- err
				return
			}
			last := n
			for {
				it, ok, err := h.PopItem(ctx)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					return
				}
				i, known := index[it.String()]
				if !known {
					errs <- fmt.Errorf("popped an unknown item %s", it)
					return
				}
				if i >= last {
					errs <- fmt.Errorf("goroutine %d popped %d after %d: not the newest", g, i, last)
					return
				}
				last = i
				mu.Lock()
				popped[it.String()]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Len(t, popped, n, "every item popped")
	for k, c := range popped {
		require.Equal(t, 1, c, "%s popped %d times", k, c)
	}
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestPopConcurrentWithAppends pops while another Store appends: nothing
// popped twice, nothing lost (popped + left = appended).
func TestPopConcurrentWithAppends(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	a := openStore(t, Options{Schema: schema})
	b := openStore(t, Options{Schema: schema})
	s, _ := a.Session("mixed")
	p, _ := b.Session("mixed")
	var wg sync.WaitGroup
	var popped []string
	var perr, aerr error
	wg.Go(func() {
		for b := range 100 {
			if aerr = s.AddItems(ctx, numbered(fmt.Sprint("b", b), 0, 3)); aerr != nil {
				return
			}
		}
	})
	wg.Go(func() {
		for range 150 {
			it, ok, err := p.PopItem(ctx)
			if err != nil {
				perr = err
				return
			}
			if ok {
				popped = append(popped, it.String())
			}
		}
	})
	wg.Wait()
	require.NoError(t, aerr)
	require.NoError(t, perr)
	left, err := s.Items(ctx)
	require.NoError(t, err)
	all := append(strs(left), popped...)
	require.Len(t, all, 300)
	seen := map[string]bool{}
	for _, x := range all {
		require.False(t, seen[x], "%s twice", x)
		seen[x] = true
	}
}

// TestPopCorruptNewest: corrupt rows above the newest valid item are
// reported and stay; only valid items are popped.
func TestPopCorruptNewest(t *testing.T) {
	ctx := context.Background()
	c := &driver.CorruptLog{}
	st := openStore(t, Options{OnCorrupt: c.Handler()})
	s, err := st.Session("corrupt-top")
	require.NoError(t, err)
	v := numbered("v", 0, 3)
	require.NoError(t, s.AddItems(ctx, v[:1]))
	require.NoError(t, st.AppendRaw(ctx, s.id, []byte("middle garbage")))
	require.NoError(t, s.AddItems(ctx, v[1:3]))
	require.NoError(t, st.AppendRaw(ctx, s.id, []byte(`[1,2]`)))
	require.NoError(t, st.AppendRaw(ctx, s.id, []byte(`{"cut":`)))
	for i := 6; i < 12; i++ { // more corrupt rows than the first window
		require.NoError(t, st.AppendRaw(ctx, s.id, []byte(fmt.Sprint("junk ", i))))
	}
	// An object nested deeper than the validator allows: valid JSON to
	// PostgreSQL, corrupt to Go. The one-statement pop must not take it.
	deep := `{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`
	require.NoError(t, st.AppendRaw(ctx, s.id, []byte(deep)))
	_, err = session.ParseItem(deep)
	require.ErrorIs(t, err, session.ErrInvalidItem, "the validator refuses the deep object")

	for _, want := range []session.Item{v[2], v[1], v[0]} {
		before := len(c.Reports(s.id))
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want.String(), it.String())
		require.Greater(t, len(c.Reports(s.id)), before, "a pop past corrupt rows reports them")
	}
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok, "only corrupt rows left: nothing to pop")

	left := rawRows(t, st, s.id)
	require.Len(t, left, 10, "no corrupt row was deleted")
	require.Equal(t, deep, left[9])
	require.Equal(t, "middle garbage", left[0])
	require.Equal(t, `[1,2]`, left[1])
	for _, r := range c.Reports(s.id) {
		require.True(t, strings.HasPrefix(r.Position, "id="), r.Position)
		require.ErrorIs(t, r.Err, session.ErrCorruptRecord)
		require.NotEmpty(t, r.Raw)
	}
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestPopEmpty: a pop of a session without rows says so, whether the
// session never had a session row, has one left by pops, or lost it to a
// Clear; and it writes nothing.
func TestPopEmpty(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, err := st.Session("pop-empty")
	require.NoError(t, err)
	sessionRows := func() int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM `+st.q.sessions+` WHERE session_id = $1`, s.sid).Scan(&n))
		return n
	}
	pop := func(want bool) {
		t.Helper()
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.Equal(t, want, ok)
	}
	pop(false)
	require.Equal(t, 0, sessionRows(), "an empty pop creates no session row")
	require.NoError(t, s.AddItems(ctx, numbered("e", 0, 2)))
	pop(true)
	pop(true)
	require.Equal(t, 1, sessionRows())
	pop(false)
	pop(false)
	require.Equal(t, 1, sessionRows(), "the session row stays")
	require.NoError(t, s.AddItems(ctx, numbered("e", 2, 3)))
	require.NoError(t, s.Clear(ctx))
	require.Equal(t, 0, sessionRows())
	pop(false)
	require.Empty(t, rawRows(t, st, s.id))
}

// TestLatestCorruptWindows: latest-N counts valid items only, however many
// corrupt rows sit among the newest.
func TestLatestCorruptWindows(t *testing.T) {
	ctx := context.Background()
	c := &driver.CorruptLog{}
	st := openStore(t, Options{OnCorrupt: c.Handler()})
	s, _ := st.Session("latest-corrupt")
	v := numbered("v", 0, 10)
	require.NoError(t, s.AddItems(ctx, v[:5]))
	for i := range 20 {
		require.NoError(t, st.AppendRaw(ctx, s.id, []byte(fmt.Sprint("bad ", i))))
	}
	require.NoError(t, s.AddItems(ctx, v[5:]))
	for n := 1; n <= 12; n++ {
		got, err := s.LatestItems(ctx, n)
		require.NoError(t, err)
		require.Equal(t, strs(v[max(0, 10-n):]), strs(got), "latest %d", n)
	}
	require.NotEmpty(t, c.Reports(s.id))
}

// TestLatestUsesIndex: in a table of many small sessions and one large,
// old one, the latest-N and pop statements on the large one walk the
// (session_id, created_at, id) index backwards, with no sort: their cost
// follows N, not the history. So do their generic plans (what a prepared
// statement may switch to after five runs), which know no session's size.
func TestLatestUsesIndex(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	c := planConn(t, st,
		`INSERT INTO `+st.q.sessions+` (session_id) SELECT 's' || g FROM generate_series(1, 500) AS g`,
		// The large session holds most of the table, and its rows are
		// the oldest: a walk down the primary key from the newest row
		// would cross every row of every other session. Its rows come in
		// batches of 20 sharing a created_at, as batches do.
		`INSERT INTO `+st.q.messages+` (session_id, message_data, created_at) SELECT 's7', '{}', timestamp '2026-01-01' + (g / 20) * interval '1 second' FROM generate_series(1, 30000) AS g`,
		`INSERT INTO `+st.q.messages+` (session_id, message_data) SELECT 's' || (g % 500 + 1), '{}' FROM generate_series(1, 5000) AS g`,
		`ANALYZE `+st.q.messages)
	explain := func(q string) string { return explainText(t, c, q) }
	for _, mode := range planModes {
		_, err := c.Exec(ctx, `SET plan_cache_mode = `+mode)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `PREPARE latest_n(text, timestamp, bigint, bigint) AS `+st.q.latest)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `PREPARE pop_1(text) AS `+st.q.popObject)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `PREPARE top_n(text, bigint) AS `+st.q.latestTop)
		require.NoError(t, err)
		for _, text := range []string{
			explain(`EXPLAIN EXECUTE latest_n('s7', '2026-01-01 00:10:00', 4611686018427387904, 50)`),
			explain(`EXPLAIN EXECUTE latest_n('s7', 'infinity', 9223372036854775807, 50)`),
			explain(`EXPLAIN EXECUTE pop_1('s7')`),
			explain(`EXPLAIN EXECUTE top_n('s7', 50)`),
		} {
			if testing.Verbose() {
				t.Logf("%s:\n%s", mode, text)
			}
			// An Index Scan, or an Index Only Scan for pop's id.
			require.Contains(t, text, "Scan Backward using "+st.q.orderIndex, "%s:\n%s", mode, text)
			require.NotContains(t, text, "Sort", "%s:\n%s", mode, text)
		}
		_, err = c.Exec(ctx, `DEALLOCATE latest_n`)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `DEALLOCATE pop_1`)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `DEALLOCATE top_n`)
		require.NoError(t, err)
	}
	_, err := c.Exec(ctx, `RESET plan_cache_mode`)
	require.NoError(t, err)
}

// TestHostileIDsStored: an id PostgreSQL cannot store as text gets an
// escaped form of its own, and ListSessions gives the caller's id back.
func TestHostileIDsStored(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	ids := []string{"a\x00b", "a", "\xff\xfe", escapedPrefix + "61", "a\x00", escapedPrefix, "plain ' OR 1=1 --"}
	for i, id := range ids {
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, numbered(fmt.Sprint(i), 0, 1)))
	}
	for i, id := range ids {
		s, _ := st.Session(id)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, strs(numbered(fmt.Sprint(i), 0, 1)), strs(got), "%q", id)
	}
	list, err := st.ListSessions(ctx)
	require.NoError(t, err)
	slices.Sort(list)
	want := slices.Clone(ids)
	slices.Sort(want)
	require.Equal(t, want, list)
	require.Equal(t, "a", storedID("a"), "a storable id is stored as it is")
	_, err = st.Session("")
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
}

func TestOptions(t *testing.T) {
	ctx := context.Background()
	url := serverURL(t)
	for _, o := range []Options{
		{SessionsTable: "bad name"},
		{MessagesTable: "x; DROP TABLE y"},
		{MessagesTable: strings.Repeat("m", 47)},
		{SessionsTable: strings.Repeat("s", 64)},
		{Schema: "1abc"},
		{SessionsTable: "same", MessagesTable: "same"},
		{SessionsTable: "Same", MessagesTable: "same"},
		{SessionsTable: `a"b`},
	} {
		_, err := Open(ctx, url, o)
		require.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	_, err := OpenPool(ctx, nil, Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)

	// Keywords and mixed case are fine: names are quoted.
	st := openStore(t, Options{SessionsTable: "select", MessagesTable: "Order"})
	s, err := st.Session("k")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("k", 0, 2)))
	got, err := s.LatestItems(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, strs(numbered("k", 1, 2)), strs(got))

	// SkipCreateTables on an empty schema: the tables must exist.
	_, err = Open(ctx, url, Options{Schema: freshSchema(t), SkipCreateTables: true})
	require.ErrorIs(t, err, ErrNoSchema)
	// ...and opens tables that do.
	ro, err := Open(ctx, url, Options{Schema: st.opts.Schema, SessionsTable: "select", MessagesTable: "Order", SkipCreateTables: true})
	require.NoError(t, err)
	defer ro.Close()
	rs, _ := ro.Session("k")
	got, err = rs.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, err := st.Session("c")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	_, err = st.Session("c")
	require.ErrorIs(t, err, session.ErrClosed)
	require.ErrorIs(t, s.AddItems(ctx, numbered("c", 0, 1)), session.ErrClosed)
	_, err = s.Items(ctx)
	require.ErrorIs(t, err, session.ErrClosed)
	_, _, err = s.PopItem(ctx)
	require.ErrorIs(t, err, session.ErrClosed)
	require.ErrorIs(t, s.Clear(ctx), session.ErrClosed)
	require.ErrorIs(t, st.AppendRaw(ctx, "c", []byte("x")), session.ErrClosed)
}

// TestOpenPoolNotOwned: a Store on the caller's pool leaves it open.
func TestOpenPoolNotOwned(t *testing.T) {
	ctx := context.Background()
	owner := openStore(t, Options{})
	st, err := OpenPool(ctx, owner.Pool(), Options{Schema: owner.opts.Schema})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, owner.Pool().Ping(ctx), "the caller's pool is still open")
}

// TestReplaceAtomicToReaders: a reader running beside replaces sees either
// the whole old history or the whole new one, never a mix or a gap.
func TestReplaceAtomicToReaders(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, _ := st.Session("r")
	x, y := numbered("x", 0, 20), numbered("y", 0, 7)
	require.NoError(t, s.AddItems(ctx, x))
	done := make(chan struct{})
	var rerr error
	go func() {
		defer close(done)
		for range 200 {
			got, err := s.Items(ctx)
			if err != nil {
				rerr = err
				return
			}
			if g := strs(got); !slices.Equal(g, strs(x)) && !slices.Equal(g, strs(y)) {
				rerr = fmt.Errorf("a reader saw %d items: neither history", len(g))
				return
			}
		}
	}()
	for i := range 100 {
		h := x
		if i%2 == 0 {
			h = y
		}
		require.NoError(t, s.ReplaceItems(ctx, h))
	}
	<-done
	require.NoError(t, rerr)
}

// TestCorruptReportsOnlyValid checks the decoder on a rejected batch:
// nothing written.
func TestRejectedBatchWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, _ := st.Session("rej")
	err := s.AddItems(ctx, []session.Item{item(`{"a":1}`), {}})
	require.True(t, errors.Is(err, session.ErrInvalidItem), "%v", err)
	require.Empty(t, rawRows(t, st, "rej"))
	var ie *session.ItemError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, 1, ie.Index)
	_ = driver.CorruptRecord{}
}

// TestCancelledWritesAreWholeOrNothing: writes whose context ends at
// random moments leave every batch whole or absent, never a part: after an
// append and a replace that may each have been cut short, the history is
// the one before, or it plus the whole batch, or the whole replacement.
func TestCancelledWritesAreWholeOrNothing(t *testing.T) {
	st := openStore(t, Options{})
	s, _ := st.Session("cancel")
	const size = 2000
	batch, half := strs(numbered("c", 0, size)), strs(numbered("h", 0, size/2))
	// Deadlines spread from 0 to twice what each write takes here.
	start := time.Now()
	require.NoError(t, s.AddItems(context.Background(), numbered("c", 0, size)))
	add := time.Since(start)
	start = time.Now()
	require.NoError(t, s.ReplaceItems(context.Background(), numbered("h", 0, size/2)))
	replace := time.Since(start)
	prev := half
	outcomes := map[string]int{}
	const rounds = 30
	for i := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 2*add*time.Duration(i)/rounds)
		err := s.AddItems(ctx, numbered("c", 0, size))
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		unknown := errors.Is(err, session.ErrOutcomeUnknown)
		ctx, cancel = context.WithTimeout(context.Background(), 2*replace*time.Duration((i*7)%rounds)/rounds)
		err = s.ReplaceItems(ctx, numbered("h", 0, size/2))
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		if unknown = unknown || errors.Is(err, session.ErrOutcomeUnknown); unknown {
			// The server may still be running a write the client gave
			// up on: read once it is done.
			outcomes["unknown"]++
			settle(t, st)
		}
		items, err := s.Items(context.Background())
		require.NoError(t, err)
		got := strs(items)
		switch {
		case slices.Equal(got, half):
			outcomes["replaced"]++
		case slices.Equal(got, append(slices.Clone(prev), batch...)):
			outcomes["appended"]++
		case slices.Equal(got, prev):
			outcomes["neither"]++
		default:
			t.Fatalf("round %d: %d items, not a whole outcome (had %d)", i, len(got), len(prev))
		}
		prev = got
	}
	t.Logf("outcomes: %v", outcomes)
}

// settle waits until no other backend runs a statement on st's tables:
// a write whose client gave up (its outcome unknown) has committed or
// rolled back by then.
func settle(t *testing.T, st *Store) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND state <> 'idle' AND strpos(query, $1) > 0`, quote(st.opts.Schema)).Scan(&n))
		if n == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "a write still runs after 20 s")
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPopRestoresOnDisagreement: if the one-statement pop deletes a row
// PostgreSQL reads as an object but Go does not (the parsers agree, so the
// test makes Go refuse a marked row), the row is put back under its id,
// with its bytes, and the pop takes the newest valid item below it.
func TestPopRestoresOnDisagreement(t *testing.T) {
	ctx := context.Background()
	c := &driver.CorruptLog{}
	st := openStore(t, Options{OnCorrupt: c.Handler()})
	s, _ := st.Session("disagree")
	require.NoError(t, s.AddItems(ctx, numbered("v", 0, 2)))
	marked := `{"marked":"go refuses this one"}`
	require.NoError(t, st.AppendRaw(ctx, s.id, []byte(marked)))
	var before int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT max(id) FROM `+st.q.messages).Scan(&before))

	decodeStored = func(d *driver.Decoder, raw string) (session.Item, error) {
		if strings.Contains(raw, `"marked"`) {
			return session.Item{}, fmt.Errorf("%w: refused by the test", session.ErrCorruptRecord)
		}
		return d.DecodeString(raw)
	}
	t.Cleanup(func() { decodeStored = (*driver.Decoder).DecodeString })

	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, numbered("v", 1, 2)[0].String(), it.String(), "the pop took the valid item below")
	require.Equal(t, []string{numbered("v", 0, 1)[0].String(), marked}, rawRows(t, st, s.id), "the marked row is back")
	var id int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM `+st.q.messages+` WHERE message_data = $1`, marked).Scan(&id))
	require.Equal(t, before, id, "under its own id")
	require.NotEmpty(t, c.Reports(s.id), "and it is reported")
}
