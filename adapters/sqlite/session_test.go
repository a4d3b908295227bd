package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// fixture is a Store on a fresh file with a collector of corrupt reports.
type fixture struct {
	path    string
	st      *Store
	corrupt *driver.CorruptLog
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{path: filepath.Join(t.TempDir(), "s.db"), corrupt: &driver.CorruptLog{}}
	f.st = openStore(t, f.path, Options{OnCorrupt: f.corrupt.Handler()})
	return f
}

func (f *fixture) session(t *testing.T, id string) *Session {
	t.Helper()
	s, err := f.st.Session(id)
	require.NoError(t, err)
	return s
}

// numbered returns n items {"<p>":i}.
func numbered(p string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{%q:%d}`, p, i))
	}
	return out
}

func texts(its []session.Item) []string {
	out := make([]string, len(its))
	for i, it := range its {
		out[i] = it.String()
	}
	return out
}

func TestStoredLayout(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "layout")
	require.NoError(t, s.AddItems(ctx, items(t, `{ "spaced" : true }`, `{"b":"é"}`)))
	rows, err := f.st.DB().QueryContext(ctx,
		`SELECT session_id, message_data, typeof(message_data), created_at IS NOT NULL FROM agent_messages ORDER BY id`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var id, data, typ string
		var created bool
		require.NoError(t, rows.Scan(&id, &data, &typ, &created))
		require.True(t, created)
		got = append(got, id+"|"+data+"|"+typ)
	}
	require.NoError(t, closeRows(rows))
	require.Equal(t, []string{`layout|{ "spaced" : true }|text`, `layout|{"b":"é"}|text`}, got,
		"message_data holds the item's exact bytes as TEXT")

	var created, updated string
	require.NoError(t, f.st.DB().QueryRowContext(ctx,
		`SELECT created_at, updated_at FROM agent_sessions WHERE session_id = ?`, "layout").Scan(&created, &updated))
	require.NotEmpty(t, created)
	require.NotEmpty(t, updated)

	require.NoError(t, s.Clear(ctx))
	var n int
	require.NoError(t, f.st.DB().QueryRowContext(ctx, `SELECT count(*) FROM agent_sessions`).Scan(&n))
	require.Zero(t, n, "Clear deletes the session row too")
}

func TestLatestSkipsCorruptRows(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		layout  string // v = valid item, x = corrupt row, oldest first
		n       int
		corrupt int // corrupt rows LatestItems must read (each reported once)
	}{
		{"none", "vvvvv", 3, 0},
		{"one in the window", "vvvvxvv", 3, 1},
		{"window all corrupt", "vvvxxx", 2, 3},
		{"needs doubling twice", "vv" + strings.Repeat("x", 12) + "v", 3, 12},
		{"short history", "xvxv", 5, 2},
		{"only corrupt", "xxxx", 2, 4},
		{"oldest corrupt unread", "xvvvv", 4, 0},
		{"huge n", "vxv", math.MaxInt, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.session(t, "c")
			valid := []string{}
			for i, c := range tc.layout {
				if c == 'v' {
					it := session.MustItem(fmt.Sprintf(`{"i":%d}`, i))
					require.NoError(t, s.AddItems(ctx, []session.Item{it}))
					valid = append(valid, it.String())
				} else {
					require.NoError(t, insertRaw(ctx, f.st, "c", []byte(fmt.Sprintf("corrupt %d", i))))
				}
			}
			got, err := s.LatestItems(ctx, tc.n)
			require.NoError(t, err)
			want := valid[max(0, len(valid)-tc.n):]
			require.Equal(t, want, texts(got))
			reports := f.corrupt.Reports("c")
			require.Len(t, reports, tc.corrupt, "each corrupt row read is reported exactly once")
			seen := map[string]bool{}
			for _, r := range reports {
				require.False(t, seen[r.Position], "row %s read twice", r.Position)
				seen[r.Position] = true
				require.True(t, strings.HasPrefix(r.Position, "id="), r.Position)
				require.True(t, strings.HasPrefix(string(r.Raw), "corrupt "), "a report carries the raw bytes")
				require.ErrorIs(t, r.Err, session.ErrCorruptRecord)
				require.Equal(t, "c", r.SessionID)
			}
		})
	}
}

// TestLatestSnapshot changes the session between the first window and the
// later ones: the answer must be the newest items of one state, never a
// mix.
func TestLatestSnapshot(t *testing.T) {
	ctx := context.Background()
	for name, change := range map[string]func(t *testing.T, s *Session){
		"replaced": func(t *testing.T, s *Session) {
			require.NoError(t, s.ReplaceItems(ctx, numbered("new", 5)))
		},
		"appended": func(t *testing.T, s *Session) {
			require.NoError(t, s.AddItems(ctx, numbered("new", 1)))
		},
		"popped": func(t *testing.T, s *Session) {
			_, _, err := s.PopItem(ctx)
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			s := f.session(t, "snap")
			require.NoError(t, s.AddItems(ctx, numbered("old", 4)))
			require.NoError(t, insertRaw(ctx, f.st, "snap", []byte("corrupt")))
			require.NoError(t, s.AddItems(ctx, numbered("top", 1)))
			testHookLatest = func() { change(t, s) }
			defer func() { testHookLatest = nil }()
			got, err := s.LatestItems(ctx, 3)
			testHookLatest = nil
			require.NoError(t, err)
			all, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, texts(all[max(len(all)-3, 0):]), texts(got), "latest is the newest items of the state after the change")
		})
	}
}

// rawRows returns the message_data of every row of session id, oldest
// first, unvalidated.
func rawRows(t *testing.T, st *Store, id string) []string {
	t.Helper()
	rows, err := st.DB().QueryContext(context.Background(), `SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id`, id)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, closeRows(rows))
	return out
}

// TestPopCorrupt: PopItem never deletes an unreadable record, not even one
// above the item it pops (issue 9.4); it reports each one it passes.
func TestPopCorrupt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "p")
	v := numbered("v", 2)
	require.NoError(t, s.AddItems(ctx, v))
	require.NoError(t, insertRaw(ctx, f.st, "p", []byte(`[1]`)))
	require.NoError(t, insertRaw(ctx, f.st, "p", []byte(`{"cut":`)))

	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, v[1].String(), it.String())
	reports := f.corrupt.Reports("p")
	require.Len(t, reports, 2, "both unreadable rows passed over are reported")
	require.Equal(t, `[1]`, string(reports[0].Raw), "oldest first, with their bytes")
	require.Equal(t, `{"cut":`, string(reports[1].Raw))
	require.Equal(t, []string{v[0].String(), `[1]`, `{"cut":`}, rawRows(t, f.st, "p"),
		"the unreadable rows stay, byte for byte; only the popped item is gone")

	it, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, v[0].String(), it.String())
	_, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok, "no readable item left")
	require.Equal(t, []string{`[1]`, `{"cut":`}, rawRows(t, f.st, "p"), "still there")

	// A session of unreadable rows only pops empty and deletes nothing.
	q := f.session(t, "q")
	require.NoError(t, insertRaw(ctx, f.st, "q", []byte(`nope`)))
	_, ok, err = q.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.Len(t, f.corrupt.Reports("q"), 1)
	require.Equal(t, []string{`nope`}, rawRows(t, f.st, "q"))

	// Many unreadable rows above: the walk down spans several windows.
	r := f.session(t, "r")
	require.NoError(t, r.AddItems(ctx, numbered("r", 1)))
	for i := range 40 {
		require.NoError(t, insertRaw(ctx, f.st, "r", []byte(fmt.Sprintf("bad %d", i))))
	}
	it, ok, err = r.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, numbered("r", 1)[0].String(), it.String())
	require.Len(t, rawRows(t, f.st, "r"), 40)
	require.Len(t, f.corrupt.Reports("r"), 40)
}

func TestReplaceAtomic(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "r")
	require.NoError(t, s.AddItems(ctx, numbered("old", 3)))
	err := s.ReplaceItems(ctx, []session.Item{numbered("new", 1)[0], {}})
	require.ErrorIs(t, err, session.ErrInvalidItem)
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("old", 3)), texts(all))

	// A failing insert (a trigger refusing one row) rolls the delete back.
	_, err = f.st.DB().ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON agent_messages
        WHEN NEW.message_data = '{"refuse":1}' BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	require.NoError(t, err)
	err = s.ReplaceItems(ctx, items(t, `{"ok":1}`, `{"refuse":1}`))
	require.ErrorContains(t, err, "refused")
	all, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("old", 3)), texts(all), "a failed replace changes nothing")
	err = s.AddItems(ctx, items(t, `{"ok":1}`, `{"refuse":1}`))
	require.ErrorContains(t, err, "refused")
	all, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("old", 3)), texts(all), "a failed batch writes nothing")
}

func TestLargeBatchSpansStatements(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.session(t, "big")
	batch := numbered("b", 2*maxRowsPerInsert+7)
	require.NoError(t, s.AddItems(ctx, batch))
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(batch), texts(all))
	require.NoError(t, s.ReplaceItems(ctx, batch[:maxRowsPerInsert+1]))
	all, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(batch[:maxRowsPerInsert+1]), texts(all))
}

// holdLock begins a write transaction on the file through a connection of
// its own and returns the function that ends it.
func holdLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	c, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = c.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, err := c.ExecContext(context.Background(), "ROLLBACK")
			require.NoError(t, err)
			require.NoError(t, c.Close())
			require.NoError(t, db.Close())
		})
	}
	t.Cleanup(release)
	return release
}

func TestBusy(t *testing.T) {
	ctx := context.Background()
	t.Run("waits for the lock", func(t *testing.T) {
		f := newFixture(t)
		s := f.session(t, "b")
		release := holdLock(t, f.path)
		time.AfterFunc(100*time.Millisecond, release)
		require.NoError(t, s.AddItems(ctx, numbered("b", 2)))
		all, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, all, 2)
	})
	t.Run("gives up after BusyTimeout", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "b.db")
		st := openStore(t, path, Options{BusyTimeout: 50 * time.Millisecond})
		s, err := st.Session("b")
		require.NoError(t, err)
		holdLock(t, path)
		err = s.AddItems(ctx, numbered("b", 1))
		require.Error(t, err)
		require.True(t, isBusy(err), "%v", err)
	})
	t.Run("context ends the wait", func(t *testing.T) {
		f := newFixture(t)
		s := f.session(t, "b")
		release := holdLock(t, f.path)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := s.AddItems(cctx, numbered("b", 1))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		release()
		all, err := s.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, all, "the cancelled write wrote nothing")
		require.NoError(t, s.AddItems(ctx, numbered("c", 1)), "the store is usable after a cancelled write")
	})
	t.Run("injected DB without busy_timeout is retried", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "b.db")
		db, err := sql.Open("sqlite", path) // no pragmas: SQLite fails at once when busy
		require.NoError(t, err)
		defer db.Close()
		st, err := OpenDB(ctx, db, Options{BusyTimeout: 5 * time.Second})
		require.NoError(t, err)
		s, err := st.Session("b")
		require.NoError(t, err)
		release := holdLock(t, path)
		time.AfterFunc(100*time.Millisecond, release)
		require.NoError(t, s.AddItems(ctx, numbered("b", 3)))
		all, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, all, 3)
	})
}

func TestCancelledBeforeCall(t *testing.T) {
	f := newFixture(t)
	s := f.session(t, "x")
	require.NoError(t, s.AddItems(context.Background(), numbered("keep", 1)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range map[string]func() error{
		"AddItems":        func() error { return s.AddItems(ctx, numbered("lost", 1)) },
		"AddItems(empty)": func() error { return s.AddItems(ctx, nil) },
		"Items":           func() error { _, err := s.Items(ctx); return err },
		"LatestItems":     func() error { _, err := s.LatestItems(ctx, 1); return err },
		"LatestItems(0)":  func() error { _, err := s.LatestItems(ctx, 0); return err },
		"PopItem":         func() error { _, _, err := s.PopItem(ctx); return err },
		"Clear":           func() error { return s.Clear(ctx) },
		"ReplaceItems":    func() error { return s.ReplaceItems(ctx, nil) },
	} {
		err := call()
		require.True(t, errors.Is(err, context.Canceled), "%s: %v", name, err)
	}
	all, err := s.Items(context.Background())
	require.NoError(t, err)
	require.Equal(t, texts(numbered("keep", 1)), texts(all))
}

func TestEmptyID(t *testing.T) {
	f := newFixture(t)
	_, err := f.st.Session("")
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
}

func TestNegativeLimit(t *testing.T) {
	f := newFixture(t)
	_, err := f.session(t, "n").LatestItems(context.Background(), -1)
	require.ErrorIs(t, err, session.ErrInvalidLimit)
}

// TestQueryPlans pins that every per-session statement goes through the
// (session_id, id) index, in id order, without sorting: reads of the
// newest items cost the same at any history length.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for name, q := range map[string]string{
		"items":      f.st.q.items,
		"latest":     f.st.q.latest,
		"itemsData":  f.st.q.itemsData,
		"latestData": f.st.q.latestData,
		"pop":        f.st.q.pop,
		"clear":      f.st.q.clearMessages,
	} {
		rows, err := f.st.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "id", int64(10), int64(5))
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, closeRows(rows))
		joined := strings.Join(plan, "; ")
		require.Regexp(t, `USING (COVERING )?INDEX idx_agent_messages_session_id \(session_id=\?`, joined, name)
		require.NotContains(t, joined, "SCAN", "%s: %s", name, joined)
		require.NotContains(t, joined, "TEMP B-TREE", "%s: %s", name, joined)
		t.Logf("%s: %s", name, joined)
	}
}

// TestRollbackWithoutTransaction covers a rollback after SQLite already
// ended the transaction itself (as an interrupted write does): nothing is
// discarded and the Store stays usable, in-memory ones included.
func TestRollbackWithoutTransaction(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{filepath.Join(t.TempDir(), "r.db"), ":memory:"} {
		st := openStore(t, path, Options{})
		c, err := st.DB().Conn(ctx)
		require.NoError(t, err)
		st.rollback(ctx, c)
		require.NoError(t, c.Close())
		require.False(t, st.closed.Load(), path)
		s, err := st.Session("r")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, numbered("r", 1)), path)
	}
}
