package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOptionsSynchronous(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []Synchronous{"off", "extra", "2", " full"} {
		_, err := OpenFile(ctx, ":memory:", Options{Synchronous: bad})
		require.ErrorIs(t, err, ErrInvalidOptions, "%q", bad)
	}
	for _, tc := range []struct {
		opt  Synchronous
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {SyncFull, 2}, {SyncNormal, 1}, {"NORMAL", 1}} {
		t.Run(fmt.Sprintf("Open %q", tc.opt), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st := openStore(t, path, Options{Synchronous: tc.opt})
			s, err := st.Session("a")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
			var got int
			require.NoError(t, st.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got))
			require.Equal(t, tc.want, got, "every connection")
			var wgot int
			require.NoError(t, st.w.wc.c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&wgot))
			require.Equal(t, tc.want, wgot, "the write connection")
			dsn, err := DSN(path, Options{Synchronous: tc.opt})
			require.NoError(t, err)
			require.Contains(t, dsn, "synchronous%28"+map[int]string{1: "NORMAL", 2: "FULL"}[tc.want]+"%29")
		})
	}
	t.Run("OpenDB sets it on its write connection", func(t *testing.T) {
		db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "injected.db"))
		require.NoError(t, err)
		defer db.Close()
		st, err := OpenDB(ctx, db, Options{Synchronous: SyncNormal})
		require.NoError(t, err)
		defer st.Close()
		s, err := st.Session("a")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
		var got int
		require.NoError(t, st.w.wc.c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got))
		require.Equal(t, 1, got)
	})
}

// TestHeldConnectionGivenBack: OpenDB's caller gets its connection back at
// Close with the busy_timeout it had (the writer sets 0 while it holds it).
func TestHeldConnectionGivenBack(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "injected.db")+"?_pragma=busy_timeout(1234)")
	require.NoError(t, err)
	defer db.Close()
	db.SetMaxOpenConns(2)
	st, err := OpenDB(ctx, db, Options{})
	require.NoError(t, err)
	s, err := st.Session("a")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
	require.Equal(t, 1, db.Stats().InUse, "the writer holds one connection")
	require.NoError(t, st.Close())
	require.Zero(t, db.Stats().InUse)
	for range 2 { // both connections of the pool
		c, err := db.Conn(ctx)
		require.NoError(t, err)
		defer c.Close()
		var ms int
		require.NoError(t, c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms))
		require.Equal(t, 1234, ms)
	}
}

// TestLatestAllocsFlat: the allocations of LatestItems do not grow with the
// length of the history.
func TestLatestAllocsFlat(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	fill(t, f.st.DB(), "short", 100)
	fill(t, f.st.DB(), "long", 50_000)
	allocs := map[string]float64{}
	for _, id := range []string{"short", "long"} {
		s := f.session(t, id)
		allocs[id] = testing.AllocsPerRun(50, func() {
			got, err := s.LatestItems(ctx, 50)
			if err != nil || len(got) != 50 {
				t.Fatal(err, len(got))
			}
		})
	}
	require.InDelta(t, allocs["short"], allocs["long"], 1, "allocations per LatestItems(50): %v", allocs)
	t.Logf("allocations per LatestItems(50): %v", allocs)
}
