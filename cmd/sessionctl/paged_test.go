package main

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
)

// pagedScheme is a test-only scheme: sessionctltest-paged:///PATH is the
// SQLite file PATH through a store that lists its sessions a page at a
// time only (adapters.PageLister, no adapters.Lister), counting the pages
// it lists per PATH.
const pagedScheme = "sessionctltest-paged"

var pagesListed sync.Map // PATH → *atomic.Int64

type pagedOpener struct{}

func (pagedOpener) OpenStoreURL(ctx context.Context, u *url.URL, opts adapters.Options) (adapters.Store, error) {
	st, err := adapters.OpenWith(ctx, "sqlite://"+u.Path, opts)
	if err != nil {
		return nil, err
	}
	n, _ := pagesListed.LoadOrStore(u.Path, new(atomic.Int64))
	return pagedStore{st, st.(adapters.PageLister), n.(*atomic.Int64)}, nil
}

type pagedStore struct {
	adapters.Store
	pl    adapters.PageLister
	pages *atomic.Int64
}

func (s pagedStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	s.pages.Add(1)
	return s.pl.ListSessionsPage(ctx, cursor, limit)
}

func init() { adapters.Register(pagedScheme, pagedOpener{}) }

// pagedURL returns the paged-only URL of the SQLite URL dsn and the
// counter of the pages listed through it.
func pagedURL(dsn string) (string, *atomic.Int64) {
	path := strings.TrimPrefix(dsn, "sqlite://")
	n, _ := pagesListed.LoadOrStore(path, new(atomic.Int64))
	return pagedScheme + "://" + path, n.(*atomic.Int64)
}

const pagedOrphan = `{"type":"function_call_output","call_id":"gone","output":"x"}`

// doctor, inspect and repair enumerate the sessions a page at a time: over
// a store that can only list pages they say what they say over the same
// file through the SQLite adapter, which could list them all at once.
func TestDoctorInspectRepairListInPages(t *testing.T) {
	const n = 1203 // three pages of listPageSize and a bit
	dsn := manySessions(t, n)
	seed(t, dsn, "s00007", pagedOrphan)
	paged, pages := pagedURL(dsn)
	sessions := n + 5 // manySessions adds 5 ids that need care
	perPass := int64(sessions/listPageSize + 1)

	// every session, the progress total counted first: two passes
	code, want, _ := sessionctl(t, "doctor", dsn)
	require.Equal(t, 1, code, want)
	require.Contains(t, want, "1208 sessions checked, 1 with errors")
	pages.Store(0)
	code, got, stderr := sessionctl(t, "doctor", paged)
	require.Equal(t, 1, code, stderr)
	require.Equal(t, want, got)
	require.Equal(t, 2*perPass, pages.Load(), "pages listed")

	// named sessions, one the store does not list: one pass
	code, want, _ = sessionctl(t, "doctor", "-session", "s00007", "-session", "zz-missing", dsn)
	require.Equal(t, 1, code)
	require.Contains(t, want, `session "zz-missing": no such session`)
	pages.Store(0)
	code, got, _ = sessionctl(t, "doctor", "-session", "s00007", "-session", "zz-missing", paged)
	require.Equal(t, 1, code)
	require.Equal(t, want, got)
	require.Equal(t, perPass, pages.Load(), "pages listed")

	// inspect and repair of an id the store does not list: refused after
	// a pass over the pages, as over SQLite
	for _, args := range [][]string{{"inspect"}, {"repair"}} {
		code, wantOut, wantErr := sessionctl(t, append(args, dsn, "zz-missing")...)
		require.Equal(t, 1, code, wantErr)
		require.Contains(t, wantErr, `no such session "zz-missing"`)
		pages.Store(0)
		code, gotOut, gotErr := sessionctl(t, append(args, paged, "zz-missing")...)
		require.Equal(t, 1, code)
		require.Equal(t, wantOut, gotOut)
		require.Equal(t, strings.ReplaceAll(wantErr, dsn, paged), gotErr)
		require.Equal(t, perPass, pages.Load(), "%s: pages listed", args[0])
	}
}

// list never lists a page beyond what it prints: -limit 500 lists one
// page, -limit 700 and 1000 two, the whole store one pass; and over a
// store that only lists pages it prints the sessions it prints over the
// SQLite URL, with their counts, and the same cursor.
func TestListReadsNoPageBeyondLimit(t *testing.T) {
	const n = 1203
	dsn := manySessions(t, n)
	paged, pages := pagedURL(dsn)
	perPass := int64((n+5)/listPageSize + 1)
	for _, c := range []struct {
		args  []string
		pages int64
	}{
		{[]string{"-limit", "500"}, 1},
		{[]string{"-limit", "700"}, 2},
		{[]string{"-limit", "1000"}, 2},
		{nil, perPass},
	} {
		want := listJSON(t, append(c.args, dsn)...)
		pages.Store(0)
		got := listJSON(t, append(c.args, paged)...)
		require.Equal(t, c.pages, pages.Load(), "pages listed by list %v", c.args)
		require.Equal(t, want.NextCursor, got.NextCursor, "list %v", c.args)
		require.Equal(t, len(want.Sessions), len(got.Sessions), "list %v", c.args)
		for i := range want.Sessions {
			w, g := want.Sessions[i], got.Sessions[i]
			require.Equal(t, []any{w.SessionID, w.Items, w.Bytes}, []any{g.SessionID, g.Items, g.Bytes}, "list %v", c.args)
		}
	}
}
