package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadOnly (issue 10.3, adapter side): a read-only Store never creates
// the file or the tables, says clearly what is missing, refuses every write
// with ErrReadOnly, and reads what a writer commits.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ro := Options{ReadOnly: true}

	missing := filepath.Join(dir, "typo.db")
	_, err := OpenFile(ctx, missing, ro)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "no file created")

	// Someone else's database, without the session tables.
	foreign := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", foreign)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE users (id INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.ReadFile(foreign)
	require.NoError(t, err)
	_, err = OpenFile(ctx, foreign, ro)
	require.ErrorIs(t, err, ErrNoSchema)
	after, err := os.ReadFile(foreign)
	require.NoError(t, err)
	require.Equal(t, before, after, "the foreign database is untouched")

	_, err = OpenFile(ctx, ":memory:", ro)
	require.ErrorIs(t, err, ErrInvalidOptions)

	// A database nobody has open: read-only access creates no file.
	quiet := filepath.Join(dir, "quiet.db")
	qw := openStore(t, quiet, Options{})
	qs, err := qw.Session("a")
	require.NoError(t, err)
	require.NoError(t, qs.AddItems(ctx, numbered("q", 2)))
	require.NoError(t, qw.Close())
	_, err = os.Stat(quiet + "-wal")
	require.ErrorIs(t, err, fs.ErrNotExist, "the writer's close removed its WAL")
	qr := openStore(t, quiet, ro)
	qrs, err := qr.Session("a")
	require.NoError(t, err)
	got, err := qrs.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("q", 2)), texts(got))
	require.NoError(t, qr.Close())
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		_, err = os.Stat(quiet + suffix)
		require.ErrorIs(t, err, fs.ErrNotExist, "read-only access created %s", suffix)
	}

	// A session database: reads work, writes are refused.
	path := filepath.Join(dir, "s.db")
	w := openStore(t, path, Options{})
	ws, err := w.Session("a")
	require.NoError(t, err)
	require.NoError(t, ws.AddItems(ctx, numbered("a", 3)))
	r := openStore(t, path, ro)
	rs, err := r.Session("a")
	require.NoError(t, err)
	got, err = rs.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("a", 3)), texts(got))
	for name, call := range map[string]func() error{
		"AddItems":     func() error { return rs.AddItems(ctx, numbered("x", 1)) },
		"PopItem":      func() error { _, _, err := rs.PopItem(ctx); return err },
		"Clear":        func() error { return rs.Clear(ctx) },
		"ReplaceItems": func() error { return rs.ReplaceItems(ctx, nil) },
	} {
		require.ErrorIs(t, call(), ErrReadOnly, name)
	}
	require.NoError(t, ws.AddItems(ctx, numbered("b", 1)))
	latest, err := rs.LatestItems(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("b", 1)), texts(latest), "a read-only Store sees what a writer committed")
	got, err = ws.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 4, "nothing the read-only Store was asked to do was done")
}
