package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// unreadableKinds are stored records of every kind a read may refuse (and
// NaN, which it reads): the summary must count exactly what a read skips.
var unreadableKinds = map[string]string{
	"not-json":        `not json`,
	"truncated":       `{"a":1`,
	"array":           `[1,2]`,
	"string":          `"s"`,
	"number":          `5`,
	"null":            `null`,
	"empty":           ``,
	"trailing":        `{"a":1} x`,
	"two-objects":     `{"a":1}{"b":2}`,
	"invalid-utf8":    "{\"a\":\"\xff\xfe\"}",
	"lone-surrogate":  `{"a":"\ud800"}`,
	"lone-low":        `{"a":"\udc00x"}`,
	"too-deep":        `{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	"deep-ok":         `{"a":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
	"nan":             `{"a":NaN}`,
	"control-char":    "{\"a\":\"\x01\"}",
	"duplicate-keys":  `{"a":1,"a":2}`,
	"bom":             "\ufeff{\"a\":1}",
	"whitespace-only": ` `,
}

// The summary of a page counts the records a read skips and reports,
// for every kind of unreadable record, and agrees with a read of each
// session on items, bytes, updated time and checkpoints.
func TestSummarizeSessionsAgreesWithReads(t *testing.T) {
	ctx := context.Background()
	corrupt := &driver.CorruptLog{}
	st, err := adapters.OpenWith(ctx, "sqlite://"+filepath.Join(t.TempDir(), "s.db"), adapters.Options{OnCorrupt: corrupt.Handler()})
	require.NoError(t, err)
	defer st.Close()
	raw := st.(driver.RawAppender)
	var ids []string
	for kind, rec := range unreadableKinds {
		id := "k-" + kind
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"before":1}`)}))
		require.NoError(t, raw.AppendRaw(ctx, id, []byte(rec)))
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"after":"ü"}`)}))
		ids = append(ids, id)
	}
	// values of other types than TEXT, as a foreign writer may leave them
	db := st.(*urlStore).st.db
	_, err = db.ExecContext(ctx, `INSERT INTO agent_sessions (session_id) VALUES ('k-typed')`)
	require.NoError(t, err)
	for _, v := range []any{[]byte(`{"blob":1}`), []byte{0xff}, int64(7), 1.5} {
		_, err := db.ExecContext(ctx, `INSERT INTO agent_messages (session_id, message_data) VALUES ('k-typed', ?)`, v)
		require.NoError(t, err)
	}
	ids = append(ids, "k-typed")
	cs, err := st.Session("k-typed")
	require.NoError(t, err)
	for _, doc := range []string{`{"v":1}`, `not a document`} {
		_, err := cs.(session.CheckpointStore).SaveCheckpoint(ctx, "cp-"+doc[:3], []byte(doc), 0)
		require.NoError(t, err)
	}
	ids = append(ids, "k-none", "k-typed") // a session with nothing, and a repeat

	seen := map[string]int{}
	sums, err := st.(adapters.Summarizer).SummarizeSessions(ctx, ids, func(id string, it session.Item) { seen[id]++ })
	require.NoError(t, err)
	require.Len(t, sums, len(ids))
	for i, id := range ids {
		sum := sums[i]
		require.Equal(t, id, sum.ID)
		s, r := readOf(t, st, corrupt, id)
		require.Equal(t, r.Items, sum.Items, "%s: items", id)
		require.Equal(t, r.Bytes, sum.Bytes, "%s: bytes", id)
		require.Equal(t, r.Unreadable, sum.Unreadable, "%s: unreadable", id)
		if id != "k-typed" {
			require.Equal(t, sum.Items, seen[id], "%s: each saw every item", id)
		}
		times, found, err := st.(adapters.Timestamps).SessionTimes(ctx, id)
		require.NoError(t, err)
		require.Equal(t, found, !sum.Updated.IsZero(), "%s: updated", id)
		require.True(t, times.Updated.Equal(sum.Updated), "%s: updated", id)
		names, err := s.(session.CheckpointStore).ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Len(t, sum.Checkpoints, len(names), id)
		for j, n := range names {
			doc, v, err := s.(session.CheckpointStore).LoadCheckpoint(ctx, n)
			require.NoError(t, err)
			require.Equal(t, adapters.StoredCheckpoint{Name: n, Version: v, Document: doc}, sum.Checkpoints[j])
		}
	}
	byID := map[string]adapters.SessionSummary{}
	for _, s := range sums {
		byID[s.ID] = s
	}
	require.Equal(t, 0, byID["k-nan"].Unreadable, "NaN reads")
	require.Equal(t, 3, byID["k-nan"].Items)
	for _, kind := range []string{"not-json", "array", "invalid-utf8", "too-deep", "empty"} {
		require.Equal(t, 1, byID["k-"+kind].Unreadable, kind)
	}
	require.Equal(t, 2, len(byID["k-typed"].Checkpoints))

	// more ids than one statement binds
	many := make([]string, 0, 2*maxPageIDs+3)
	for i := 0; i < cap(many); i++ {
		many = append(many, ids[i%len(ids)])
	}
	again, err := st.(adapters.Summarizer).SummarizeSessions(ctx, many, nil)
	require.NoError(t, err)
	for i, s := range again {
		require.Equal(t, byID[many[i]], s)
	}
}

// Sorted ids that span few other sessions are read as one range of the
// index, skipping the other sessions' rows; ids spread thin, or unsorted,
// are looked up one by one. Both agree with reads.
func TestSummarizeSessionsSpan(t *testing.T) {
	ctx := context.Background()
	corrupt := &driver.CorruptLog{}
	st, err := adapters.OpenWith(ctx, "sqlite://"+filepath.Join(t.TempDir(), "s.db"), adapters.Options{OnCorrupt: corrupt.Handler()})
	require.NoError(t, err)
	defer st.Close()
	var all []string
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("a%02d", i)
		all = append(all, id)
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(fmt.Sprintf(`{"n":%d}`, i))}))
		if i%4 == 1 {
			require.NoError(t, st.(driver.RawAppender).AppendRaw(ctx, id, []byte(`{"cut`)))
		}
		for j := 0; j < i%3; j++ {
			require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(fmt.Sprintf(`{"n":%d,"j":%d}`, i, j))}))
		}
	}
	inner := st.(*urlStore).st
	pick := func(keep func(i int) bool) []string {
		var ids []string
		for i, id := range all {
			if keep(i) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for _, c := range []struct {
		name    string
		ids     []string
		spanned bool
	}{
		{"every session", all, true},
		{"all but two", pick(func(i int) bool { return i != 10 && i != 11 }), true},
		{"a few between", pick(func(i int) bool { return i < 10 || i == 15 }), true},
		{"every third", pick(func(i int) bool { return i%3 == 0 }), false},
		{"unsorted", []string{"a03", "a01", "a02"}, false},
		{"one", []string{"a05"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := inner.spanned(ctx, c.ids)
			require.NoError(t, err)
			require.Equal(t, c.spanned, got)
			seen := map[string]int{}
			sums, err := inner.SummarizeSessions(ctx, c.ids, func(id string, _ session.Item) { seen[id]++ })
			require.NoError(t, err)
			require.Len(t, sums, len(c.ids))
			want := map[string]bool{}
			for i, id := range c.ids {
				want[id] = true
				require.Equal(t, id, sums[i].ID)
				_, r := readOf(t, st, corrupt, id)
				require.Equal(t, r.Items, sums[i].Items, id)
				require.Equal(t, r.Bytes, sums[i].Bytes, id)
				require.Equal(t, r.Unreadable, sums[i].Unreadable, id)
				require.Equal(t, r.Items, seen[id], id)
				require.False(t, sums[i].Updated.IsZero(), id)
			}
			for id := range seen {
				require.True(t, want[id], "each saw %s, which is not asked for", id)
			}
		})
	}
}

// readOf reads session id as a read does and returns the session and what
// the read gave: its items, their bytes and the unreadable records
// reported.
func readOf(t *testing.T, st adapters.Store, corrupt *driver.CorruptLog, id string) (session.Session, adapters.SessionSummary) {
	t.Helper()
	corrupt.Reset(id)
	s, err := st.Session(id)
	require.NoError(t, err)
	items, err := session.All(context.Background(), s)
	require.NoError(t, err)
	r := adapters.SessionSummary{ID: id, Items: len(items), Unreadable: len(corrupt.Reports(id))}
	for _, it := range items {
		r.Bytes += int64(len(it.Bytes()))
	}
	return s, r
}
