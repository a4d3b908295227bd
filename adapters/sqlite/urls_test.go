package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestURLPathForms(t *testing.T) {
	for raw, want := range map[string]string{
		"sqlite:///var/lib/agent/s.db": "/var/lib/agent/s.db",
		"sqlite:rel/s.db":              "rel/s.db",
		"sqlite::memory:":              ":memory:",
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		got, err := sqlite.URLPath(u)
		require.NoError(t, err, raw)
		require.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"sqlite://", "sqlite:", "sqlite:///a%00b.db", "sqlite://tmp/x.db"} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		_, err = sqlite.URLPath(u)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, raw)
	}
	_, err := sqlite.URLPath(&url.URL{Scheme: "sqlite", Host: "tmp", Path: "/x.db"})
	require.ErrorContains(t, err, "write sqlite:///tmp/x.db for the absolute path /tmp/x.db, or sqlite:tmp/x.db for the relative one")
}

func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	var mu sync.Mutex
	var reports []driver.CorruptRecord
	st, err := adapters.OpenWith(ctx, "sqlite://"+path+"?sessions_table=my_sessions&messages_table=my_messages&checkpoints_table=my_checkpoints&busy_timeout=2s",
		adapters.Options{OnCorrupt: func(_ context.Context, r driver.CorruptRecord) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, r)
		}})
	require.NoError(t, err)
	defer st.Close()

	s, err := st.Session("a")
	require.NoError(t, err)
	require.Equal(t, session.Probe(s), st.Declared(), "declared = probed")
	require.Equal(t, session.Caps(session.CapLatest, session.CapReplace, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce), st.Declared())

	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	raw, ok := st.(driver.RawAppender)
	require.True(t, ok)
	require.NoError(t, raw.AppendRaw(ctx, "a", []byte("not json")))
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Len(t, reports, 1)
	require.Equal(t, "not json", string(reports[0].Raw))

	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids)
	require.Equal(t, []string{"my_checkpoints", "my_messages", "my_messages_operations", "my_sessions"}, tables(t, path), "the table options are applied")

	ck := s.(session.CheckpointCommitter)
	v, err := ck.AppendWithCheckpoint(ctx, []session.Item{session.MustItem(`{"n":2}`)}, "run", []byte("doc"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
	remover, ok := st.(interface {
		RemoveSession(ctx context.Context, id string) error
	})
	require.True(t, ok, "the URL store removes sessions for the conformance check")
	require.NoError(t, remover.RemoveSession(ctx, "a"))
	names, err := ck.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, names, "RemoveSession removed the checkpoints")
	items, err = s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, items)
}

func TestURLOpenerRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, q := range []string{
		"messages_table=mine;x", "messages_table=mine&messages_table=x", "message_table=x",
		"messages_table=bad-name", "sessions_table=x&messages_table=X", "busy_timeout=-1s",
		"checkpoints_table=bad-name", "checkpoints_table=agent_messages", "checkpoints_table=X&sessions_table=x",
	} {
		path := filepath.Join(dir, "s.db")
		_, err := adapters.Open(context.Background(), "sqlite://"+path+"?"+q)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, q)
		_, err = os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "%s: a refused URL creates nothing", q)
	}
}

// ReadOnly (issue 10.3): a mistyped path is an error and creates no file;
// an unrelated application's database is an error and is left byte for
// byte as it was; a session database is read, and writes fail.
func TestURLOpenerReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ro := adapters.Options{ReadOnly: true}

	missing := filepath.Join(dir, "typo.db")
	_, err := adapters.OpenWith(ctx, "sqlite://"+missing, ro)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist)

	_, err = adapters.OpenWith(ctx, "sqlite::memory:", ro)
	require.Error(t, err)

	app := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", app)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ann')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.ReadFile(app)
	require.NoError(t, err)
	_, err = adapters.OpenWith(ctx, "sqlite://"+app, ro)
	require.ErrorIs(t, err, sqlite.ErrNoSchema)
	after, err := os.ReadFile(app)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "the application's database is unchanged")
	require.Equal(t, []string{"users"}, tables(t, app))

	good := filepath.Join(dir, "sessions.db")
	st, err := adapters.Open(ctx, "sqlite://"+good)
	require.NoError(t, err)
	s, err := st.Session("a")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	require.NoError(t, st.Close())

	st, err = adapters.OpenWith(ctx, "sqlite://"+good, ro)
	require.NoError(t, err)
	defer st.Close()
	s, err = st.Session("a")
	require.NoError(t, err)
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Error(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":2}`)}), "a read-only store refuses writes")
	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ids)
}

// tables lists the tables of the database at path (without sqlite_*).
func tables(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	return names
}

func TestURLSynchronous(t *testing.T) {
	ctx := context.Background()
	for _, v := range []string{"full", "normal"} {
		st, err := adapters.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "s.db")+"?synchronous="+v)
		require.NoError(t, err, v)
		require.NoError(t, st.Close())
	}
	_, err := adapters.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "s.db")+"?synchronous=off")
	require.ErrorIs(t, err, adapters.ErrInvalidDSN, "off would lose commits: not offered")
}
