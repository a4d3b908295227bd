package adapters_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// pageHostileIDs are ids with the bytes a listing may mishandle: SCAN
// MATCH's glob characters, quotes, NUL, invalid UTF-8, separators.
var pageHostileIDs = []string{
	"a", "a*", "a?", "a[0]", "[", "]", "\\", "*", "?", "%", "%2A", "'", `"`, "a\x00", "a\x00x",
	"a:", ":{a}:items", "{a}", "}{", "ünïcødé-☃", " ", "\n", "\xff\xfe", "a b", "a b c",
}

// pageBackends are the backends with a paged listing: every backend, and
// Redis's Python layout.
func pageBackends() []storetest.Backend {
	bs := storetest.Backends()
	for _, b := range bs {
		if b.Name == "redis" {
			py := b
			py.Name = "redis-python"
			url := b.URL
			py.URL = func(t testing.TB) string { return url(t) + "&layout=python" }
			bs = append(bs, py)
		}
	}
	return bs
}

// ordered reports whether b lists in order (no repeat within a pass).
func ordered(b storetest.Backend) bool { return !strings.HasPrefix(b.Name, "redis") }

// fill gives each id one item, and returns the ids the store accepted.
func fill(t *testing.T, st adapters.Store, ids []string) []string {
	t.Helper()
	ctx := context.Background()
	var kept []string
	for _, id := range ids {
		s, err := st.Session(id)
		if err == nil {
			err = s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)})
		}
		if errors.Is(err, session.ErrInvalidSessionID) {
			continue // an id this backend refuses
		}
		require.NoError(t, err, "%q", id)
		kept = append(kept, id)
	}
	return kept
}

// listAll pages through st with the page sizes sizes (the last repeated),
// checking each page's size, and returns every id listed, in order.
func listAll(t *testing.T, st adapters.Store, sizes ...int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for i := 0; ; i++ {
		limit := sizes[min(i, len(sizes)-1)]
		ids, next, err := adapters.ListPage(context.Background(), st, cursor, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ids), limit, "page %d", i)
		all = append(all, ids...)
		if next == "" {
			return all
		}
		require.Less(t, i, 10000, "the listing does not end")
		cursor = next
	}
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return slices.Compact(out)
}

func TestListSessionsPage(t *testing.T) {
	for _, b := range pageBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := adapters.Open(ctx, b.URL(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			_, paged := st.(adapters.PageLister)
			require.True(t, paged, "%s implements PageLister", b.Name)

			ids := slices.Clone(pageHostileIDs)
			for i := range 23 {
				ids = append(ids, fmt.Sprintf("s%03d", i))
			}
			want := sorted(fill(t, st, ids))
			require.Greater(t, len(want), 30)
			full, err := st.(adapters.Lister).ListSessions(ctx)
			require.NoError(t, err)
			require.Equal(t, want, sorted(full), "ListSessions")

			for _, sizes := range [][]int{{1}, {3}, {7, 1, 4}, {len(want)}, {len(want) + 1}, {500}} {
				got := listAll(t, st, sizes...)
				require.Equal(t, want, sorted(got), "pages of %v: every id listed", sizes)
				if ordered(b) {
					require.Equal(t, full, got, "pages of %v: in ListSessions's order, each once", sizes)
				}
			}
		})
	}
}

// A session added or removed between pages never makes an ordered
// backend list an id twice; one added behind the cursor is not listed,
// one added ahead is, one removed ahead is not.
func TestListSessionsPageChanges(t *testing.T) {
	for _, b := range pageBackends() {
		if !ordered(b) {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := adapters.Open(ctx, b.URL(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			fill(t, st, []string{"b", "d", "f", "h", "j"})
			ids, next, err := adapters.ListPage(ctx, st, "", 2)
			require.NoError(t, err)
			require.Equal(t, []string{"b", "d"}, ids)
			fill(t, st, []string{"a", "c", "e", "i"}) // a, c behind the cursor
			h, err := st.Session("h")
			require.NoError(t, err)
			require.NoError(t, h.Clear(ctx))
			if r, ok := st.(interface {
				RemoveSession(context.Context, string) error
			}); ok {
				require.NoError(t, r.RemoveSession(ctx, "h"))
			}
			var rest []string
			for next != "" {
				ids, next, err = adapters.ListPage(ctx, st, next, 2)
				require.NoError(t, err)
				rest = append(rest, ids...)
			}
			require.Equal(t, []string{"e", "f", "i", "j"}, rest)
		})
	}
}

// listerOnly hides every capability of a store but Lister.
type listerOnly struct {
	adapters.Store
	l adapters.Lister
}

func (s listerOnly) ListSessions(ctx context.Context) ([]string, error) { return s.l.ListSessions(ctx) }

func TestListPageFallback(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer st.Close()
	want := sorted(fill(t, st, pageHostileIDs))
	lo := listerOnly{Store: st, l: st.(adapters.Lister)}
	for _, n := range []int{1, 2, 5, 100} {
		require.Equal(t, want, listAll(t, lo, n))
	}
	_, _, err = adapters.ListPage(ctx, struct{ adapters.Store }{st}, "", 1)
	require.ErrorIs(t, err, adapters.ErrCannotList)
	_, _, err = adapters.ListPage(ctx, st, "", 0)
	require.Error(t, err)
	page, next, err := adapters.PageOf([]string{"c", "a", "b"}, "a", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, page)
	require.Equal(t, "b", next)
}

// Every Summarizer agrees with reading each session: items, bytes,
// unreadable records (counted exactly as a read reports them), updated
// time, checkpoints.
func TestSummarizeSessionsAgreesWithReads(t *testing.T) {
	for _, b := range pageBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			corrupt := &driver.CorruptLog{}
			st, err := adapters.OpenWith(ctx, b.URL(t), adapters.Options{OnCorrupt: corrupt.Handler()})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			sm, ok := st.(adapters.Summarizer)
			if !ok {
				// no Summarizer (sessionctl list reads each session): nothing to compare
				require.Contains(t, []string{"memory", "mongo"}, b.Name, "every other backend summarizes pages")
				return
			}
			raws := []string{`not json`, `[1]`, `"s"`, `{"a":NaN}`, `{"a":1`, `{"a":1} x`, `{"a":"\ud800"}`,
				`{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, `{"deep":` + strings.Repeat("[", 99) + strings.Repeat("]", 99) + `}`}
			var ids []string
			for i, raw := range raws {
				id := fmt.Sprintf("r%02d-%s", i, pageHostileIDs[i%len(pageHostileIDs)])
				s, err := st.Session(id)
				require.NoError(t, err)
				require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":"ü"}`)}))
				require.NoError(t, st.(driver.RawAppender).AppendRaw(ctx, id, []byte(raw)))
				if cs, ok := s.(session.CheckpointStore); ok && i%2 == 0 {
					for _, name := range []string{"b", "a", "Z"} {
						_, err := cs.SaveCheckpoint(ctx, name, []byte(`{"x":1}`), session.AnyVersion)
						require.NoError(t, err)
					}
				}
				ids = append(ids, id)
			}
			ids = append(ids, "nothing", ids[0])
			sums, err := sm.SummarizeSessions(ctx, ids, nil)
			require.NoError(t, err)
			require.Len(t, sums, len(ids))
			for i, id := range ids {
				corrupt.Reset(id)
				s, err := st.Session(id)
				require.NoError(t, err)
				items, err := session.All(ctx, s)
				require.NoError(t, err)
				var size int64
				for _, it := range items {
					size += int64(len(it.Bytes()))
				}
				want := adapters.SessionSummary{ID: id, Items: len(items), Bytes: size, Unreadable: len(corrupt.Reports(id))}
				if ts, ok := st.(adapters.Timestamps); ok {
					tm, found, err := ts.SessionTimes(ctx, id)
					require.NoError(t, err)
					if found {
						want.Updated = tm.Updated
					}
				}
				if cs, ok := s.(session.CheckpointStore); ok {
					names, err := cs.ListCheckpoints(ctx)
					require.NoError(t, err)
					for _, n := range names {
						doc, v, err := cs.LoadCheckpoint(ctx, n)
						require.NoError(t, err)
						want.Checkpoints = append(want.Checkpoints, adapters.StoredCheckpoint{Name: n, Version: v, Document: doc})
					}
				}
				got := sums[i]
				require.True(t, want.Updated.Equal(got.Updated), "%q: updated %v, want %v", id, got.Updated, want.Updated)
				got.Updated = want.Updated
				require.Equal(t, want, got, "%q", id)
			}
			require.Equal(t, 1, sums[0].Unreadable, "not json")
		})
	}
}

// A session that holds only a checkpoint is a session: every backend
// lists it, in its full listing and in pages of every size, once on the
// ordered backends; a session with items and a checkpoint is listed once
// too. One whose checkpoint was deleted, and (on Redis) one whose only
// key is the checkpoint hash holding AddItemsOnce's operation ids after a
// Clear, are not.
func TestListSessionsPageCheckpointOnly(t *testing.T) {
	for _, b := range pageBackends() {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			st, err := adapters.Open(ctx, b.URL(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			save := func(id string) bool {
				s, err := st.Session(id)
				if errors.Is(err, session.ErrInvalidSessionID) {
					return false
				}
				require.NoError(t, err)
				cs, ok := s.(session.CheckpointStore)
				require.True(t, ok, "%s keeps checkpoints", b.Name)
				_, err = cs.SaveCheckpoint(ctx, "run", []byte(`{"v":1}`), 0)
				require.NoError(t, err, "%q", id)
				return true
			}
			var want []string
			want = append(want, fill(t, st, []string{"items", "both"})...)
			require.True(t, save("both"))
			for _, id := range []string{"cponly", "a*", ":{a}:items", "a\x00", "\xff\xfe", "x:checkpoints", "%7B"} {
				if save(id) {
					want = append(want, id)
				}
			}
			require.True(t, save("cpdeleted"))
			s, err := st.Session("cpdeleted")
			require.NoError(t, err)
			require.NoError(t, s.(session.CheckpointStore).DeleteCheckpoint(ctx, "run", session.AnyVersion))
			if strings.HasPrefix(b.Name, "redis") {
				s, err := st.Session("onceonly")
				require.NoError(t, err)
				ok, err := s.(session.OnceAppender).AddItemsOnce(ctx, "op-1", []session.Item{session.MustItem(`{"n":1}`)})
				require.NoError(t, err)
				require.True(t, ok)
				require.NoError(t, s.Clear(ctx))
			}
			want = sorted(want)

			full, err := st.(adapters.Lister).ListSessions(ctx)
			require.NoError(t, err)
			require.Equal(t, want, sorted(full), "ListSessions")
			for _, sizes := range [][]int{{1}, {2}, {3, 1}, {len(want)}, {500}} {
				got := listAll(t, st, sizes...)
				require.Equal(t, want, sorted(got), "pages of %v: every session listed", sizes)
				if ordered(b) {
					require.Equal(t, full, got, "pages of %v: in ListSessions's order, each once", sizes)
				}
			}
		})
	}
}
