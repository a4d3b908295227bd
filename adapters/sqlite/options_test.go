package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func TestOptionsTableNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sessions string
		messages string
		ok       bool
	}{
		{"defaults", "", "", true},
		{"custom", "conv", "conv_items", true},
		{"keywords are quoted", "order", "select", true},
		{"underscore start", "_s", "_m", true},
		{"63 chars", strings.Repeat("s", 63), "m", true},
		{"64 chars", strings.Repeat("s", 64), "m", false},
		{"digit start", "1s", "m", false},
		{"quote", `s"; DROP TABLE x; --`, "m", false},
		{"space", "my table", "m", false},
		{"dot", "main.s", "m", false},
		{"unicode", "séssions", "m", false},
		{"same table", "t", "T", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{SessionsTable: tc.sessions, MessagesTable: tc.messages}
			st, err := OpenFile(context.Background(), ":memory:", opts)
			if !tc.ok {
				require.ErrorIs(t, err, ErrInvalidOptions)
				_, err = DSN("x.db", opts)
				require.ErrorIs(t, err, ErrInvalidOptions)
				return
			}
			require.NoError(t, err)
			defer st.Close()
			s, err := st.Session("id")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(context.Background(), items(t, `{"a":1}`, `{"b":2}`)))
			got, err := s.LatestItems(context.Background(), 1)
			require.NoError(t, err)
			requireTexts(t, []string{`{"b":2}`}, got)
			_, idx, err := st.q.schemaObjects(context.Background(), st.DB())
			require.NoError(t, err)
			require.Equal(t, 1, idx, "the index is idx_<messages>_session_id")
		})
	}
}

func TestOptionsBusyTimeout(t *testing.T) {
	_, err := OpenFile(context.Background(), ":memory:", Options{BusyTimeout: -time.Second})
	require.ErrorIs(t, err, ErrInvalidOptions)
	dsn, err := DSN("/tmp/a.db", Options{BusyTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	require.Contains(t, dsn, "busy_timeout%281500%29")
}

func TestDSN(t *testing.T) {
	for _, tc := range []struct{ path, prefix string }{
		{"/tmp/a.db", "/tmp/a.db?_pragma="},
		{":memory:", ":memory:?_pragma="},
		{"file:/tmp/a.db?mode=rwc", "file:/tmp/a.db?mode=rwc&_pragma="},
	} {
		dsn, err := DSN(tc.path, Options{})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(dsn, tc.prefix), dsn)
		for _, p := range []string{"busy_timeout%285000%29", "foreign_keys%281%29", "journal_mode%28WAL%29"} {
			require.Contains(t, dsn, p)
		}
	}
	_, err := DSN("", Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestInMemory(t *testing.T) {
	for path, want := range map[string]bool{
		":memory:":                          true,
		":memory:?cache=shared":             true,
		"file::memory:":                     true,
		"file::memory:?cache=shared":        true,
		"file:x?mode=memory&cache=shared":   true,
		"file:/tmp/x.db":                    false,
		"file:/tmp/x.db?mode=rwc":           false,
		"/tmp/x.db":                         false,
		"memory.db":                         false,
		"/tmp/:memory:":                     false,
		"file:/tmp/x.db?mode=ro&vfs=unix-x": false,
	} {
		assert.Equal(t, want, inMemory(path), path)
	}
}

func TestOpenPragmas(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "p.db"), Options{BusyTimeout: 1234 * time.Millisecond})
	var mode string
	var fk, busy int
	c, err := st.DB().Conn(context.Background())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.QueryRowContext(context.Background(), "PRAGMA journal_mode").Scan(&mode))
	require.NoError(t, c.QueryRowContext(context.Background(), "PRAGMA foreign_keys").Scan(&fk))
	require.NoError(t, c.QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&busy))
	require.Equal(t, "wal", mode)
	require.Equal(t, 1, fk)
	require.Equal(t, 1234, busy)
}

func TestOpenDBStaysCallers(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "injected.db"))
	require.NoError(t, err)
	defer db.Close()
	st, err := OpenDB(ctx, db, Options{})
	require.NoError(t, err)
	s, err := st.Session("a")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items(t, `{"x":1}`)))
	require.Same(t, db, st.DB())
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	require.NoError(t, db.PingContext(ctx), "an injected *sql.DB stays open")
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM agent_messages").Scan(&n))
	require.Equal(t, 1, n)

	_, err = OpenDB(ctx, nil, Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	st, err := OpenFile(ctx, filepath.Join(t.TempDir(), "c.db"), Options{})
	require.NoError(t, err)
	s, err := st.Session("a")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items(t, `{"x":1}`)))
	require.NoError(t, st.Close())
	require.Error(t, st.DB().PingContext(ctx), "Open's *sql.DB is closed by Close")

	_, err = st.Session("b")
	require.ErrorIs(t, err, session.ErrClosed)
	for name, call := range map[string]func() error{
		"AddItems":        func() error { return s.AddItems(ctx, items(t, `{"y":1}`)) },
		"AddItems(empty)": func() error { return s.AddItems(ctx, nil) },
		"Items":           func() error { _, err := s.Items(ctx); return err },
		"LatestItems":     func() error { _, err := s.LatestItems(ctx, 1); return err },
		"LatestItems(0)":  func() error { _, err := s.LatestItems(ctx, 0); return err },
		"PopItem":         func() error { _, _, err := s.PopItem(ctx); return err },
		"Clear":           func() error { return s.Clear(ctx) },
		"ReplaceItems":    func() error { return s.ReplaceItems(ctx, nil) },
	} {
		require.ErrorIs(t, call(), session.ErrClosed, name)
	}
}

func TestSkipCreateTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "skip.db")
	_, err := OpenFile(ctx, path, Options{SkipCreateTables: true})
	require.ErrorIs(t, err, ErrNoSchema)
	openStore(t, path, Options{}) // creates the schema
	st := openStore(t, path, Options{SkipCreateTables: true})
	s, err := st.Session("a")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items(t, `{"x":1}`)))
	_, err = OpenFile(ctx, path, Options{SkipCreateTables: true, MessagesTable: "other"})
	require.ErrorIs(t, err, ErrNoSchema)
}

func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := OpenFile(ctx, ":memory:", Options{})
	require.True(t, errors.Is(err, context.Canceled), err)
	_, err = OpenDB(ctx, &sql.DB{}, Options{})
	require.True(t, errors.Is(err, context.Canceled), err)
}

// items parses JSON object literals.
func items(t testing.TB, ss ...string) []session.Item {
	t.Helper()
	out, err := session.ParseItems(ss...)
	require.NoError(t, err)
	return out
}

func requireTexts(t testing.TB, want []string, got []session.Item, msgAndArgs ...any) {
	t.Helper()
	texts := make([]string, len(got))
	for i, it := range got {
		texts[i] = it.String()
	}
	if want == nil {
		want = []string{}
	}
	require.Equal(t, want, texts, msgAndArgs...)
}

// oldPythonStore makes at path the tables of a store the Python SDK made
// before 0.7, whose session index is on (session_id, created_at).
func oldPythonStore(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(tb, err)
	q := newQueries(Options{SessionsTable: DefaultSessionsTable, MessagesTable: DefaultMessagesTable})
	for _, ddl := range []string{q.createSessions, q.createMessages,
		`CREATE INDEX idx_agent_messages_session_id ON agent_messages (session_id, created_at)`} {
		_, err := db.Exec(ddl)
		require.NoError(tb, err)
	}
	return db
}

// TestOldPythonIndexIsFixed: a store the Python SDK made before 0.7 has its
// session index on (session_id, created_at). A read-only open warns and
// names the fix; a read-write open adds an index of its own on
// (session_id, id), says so once, and latest-N then reads by index
// without sorting the session.
func TestOldPythonIndexIsFixed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	q := newQueries(Options{SessionsTable: DefaultSessionsTable, MessagesTable: DefaultMessagesTable})
	require.NoError(t, oldPythonStore(t, path).Close())
	plan := func() string {
		db, err := sql.Open("sqlite", path+"?mode=ro")
		require.NoError(t, err)
		defer db.Close()
		rows, err := db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q.latestData, "a", 50)
		require.NoError(t, err)
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			lines = append(lines, detail)
		}
		return strings.Join(lines, "; ")
	}
	before := plan()
	t.Logf("latest-N plan on the old index: %s", before)
	require.Contains(t, before, "TEMP B-TREE FOR ORDER BY", "the old index sorts the session")

	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(prev)
	ro := openStore(t, path, Options{ReadOnly: true})
	require.Contains(t, logged.String(), "columns=session_id,created_at")
	require.Contains(t, logged.String(), "opening the store read-write once")
	require.NoError(t, ro.Close())
	require.Equal(t, before, plan(), "a read-only open changes nothing")

	logged.Reset()
	st := openStore(t, path, Options{})
	require.Contains(t, logged.String(), "added an index on (session_id, id)")
	require.Contains(t, logged.String(), "index=agentsessions_agent_messages_session_id_id")
	after := plan()
	t.Logf("latest-N plan after the read-write open: %s", after)
	require.Contains(t, after, "agentsessions_agent_messages_session_id_id")
	require.NotContains(t, after, "TEMP B-TREE")
	s, err := st.Session("a")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("a", 3)))
	got, err := s.LatestItems(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("a", 3)[1:]), texts(got))
	require.NoError(t, st.Close())

	logged.Reset()
	openStore(t, path, Options{})
	require.Empty(t, logged.String(), "said once: the next open finds its index")
	logged.Reset()
	openStore(t, filepath.Join(t.TempDir(), "new.db"), Options{})
	require.Empty(t, logged.String(), "nothing said for the current index")
}

// BenchmarkLatestOnOldPythonIndex reads the newest 50 of 20,000 items on a
// store with the Python SDK's pre-0.7 index, before and after the index of
// this package's own is added (TestOldPythonIndexIsFixed).
func BenchmarkLatestOnOldPythonIndex(b *testing.B) {
	ctx := context.Background()
	db := oldPythonStore(b, filepath.Join(b.TempDir(), "old.db"))
	_, err := db.ExecContext(ctx, `INSERT INTO agent_sessions (session_id) VALUES ('a')`)
	require.NoError(b, err)
	_, err = db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
		INSERT INTO agent_messages (session_id, message_data) SELECT 'a', '{"i":' || i || '}' FROM n`)
	require.NoError(b, err)
	for _, step := range []struct {
		name string
		opts Options
	}{{"old-index", Options{ReadOnly: true}}, {"own-index", Options{}}} {
		st, err := OpenDB(ctx, db, step.opts)
		require.NoError(b, err)
		s, err := st.Session("a")
		require.NoError(b, err)
		b.Run(step.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.LatestItems(ctx, 50); err != nil {
					b.Fatal(err)
				}
			}
		})
		require.NoError(b, st.Close())
	}
	require.NoError(b, db.Close())
}
