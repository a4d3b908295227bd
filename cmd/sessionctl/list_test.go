package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// manySessions makes an SQLite store of n sessions of 2 items each (with
// SQL: AddItems, one transaction each, would take long) and the ids that
// need care: quotes, NUL, invalid UTF-8, a newline.
func manySessions(t *testing.T, n int) string {
	t.Helper()
	dsn := sqliteURL(t, "many.db")
	ctx := context.Background()
	st, err := sqlite.OpenFile(ctx, strings.TrimPrefix(dsn, "sqlite://"), sqlite.Options{Synchronous: sqlite.SyncNormal})
	require.NoError(t, err)
	for _, q := range []string{
		`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1)
		 INSERT INTO agent_sessions (session_id) SELECT printf('s%05d', x) FROM c`,
		`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1 * 2)
		 INSERT INTO agent_messages (session_id, message_data) SELECT printf('s%05d', (x - 1) % ?1 + 1), '{"n":' || x || '}' FROM c`,
	} {
		_, err := st.DB().ExecContext(ctx, q, n)
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	for _, id := range []string{`"q"`, "nul\x00x", "bad\xff", "new\nline", "%*?["} {
		seed(t, dsn, id, `{"n":1}`)
	}
	return dsn
}

// listJSON runs list -json with args and decodes its document.
func listJSON(t *testing.T, args ...string) listReport {
	t.Helper()
	code, out, stderr := sessionctl(t, append([]string{"list", "-json"}, args...)...)
	require.Equal(t, 0, code, stderr)
	var lr listReport
	require.NoError(t, json.Unmarshal([]byte(out), &lr), out)
	return lr
}

// list reads pages, prints each and resumes where -limit cut it: no
// session lost or repeated across page boundaries and cursors, with -json
// and without.
func TestListLimitAndResume(t *testing.T) {
	dsn := manySessions(t, 1203)
	full := listJSON(t, dsn)
	require.Len(t, full.Sessions, 1208)
	require.Empty(t, full.NextCursor)
	var want []string
	for _, ls := range full.Sessions {
		want = append(want, ls.SessionID)
		require.Empty(t, ls.Error)
	}

	for _, limit := range []int{1, 499, 500, 501, 1208} {
		var got []string
		args := []string{"-limit", fmt.Sprint(limit), dsn}
		for pages := 0; ; pages++ {
			lr := listJSON(t, args...)
			require.LessOrEqual(t, len(lr.Sessions), limit)
			for _, ls := range lr.Sessions {
				got = append(got, ls.SessionID)
			}
			if lr.NextCursor == "" {
				break
			}
			require.Len(t, lr.Sessions, limit, "only a full page has a next cursor")
			require.Less(t, pages, 2000)
			args = []string{"-limit", fmt.Sprint(limit), "-after", lr.NextCursor, dsn}
		}
		require.Equal(t, want, got, "-limit %d", limit)
	}

	// The table: rows, then the count and the cursor to resume with.
	resume := regexp.MustCompile(`(?m)^(\d+) sessions \(-limit 700\); the listing goes on with: -after (\S+)$`)
	code, out, stderr := sessionctl(t, "list", "-limit", "700", dsn)
	require.Equal(t, 0, code, stderr)
	m := resume.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Equal(t, "700", m[1])
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 1+700+1, "header, rows, count")
	last := strings.Fields(lines[700])[0]
	require.Equal(t, quoteID(want[699]), last)
	code, out, stderr = sessionctl(t, "list", "-limit", "700", "-after", m[2], dsn)
	require.Equal(t, 0, code, stderr)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Equal(t, "508 sessions", lines[len(lines)-1])
	require.Equal(t, quoteID(want[700]), strings.Fields(lines[1])[0], "resumes after the last row")

	code, _, stderr = sessionctl(t, "list", "-after", "not a cursor!", dsn)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-after")
	code, _, stderr = sessionctl(t, "list", "-limit", "-1", dsn)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-limit")

	empty := sqliteURL(t, "empty.db")
	seed(t, empty, "x", `{"n":1}`)
	lr := listJSON(t, "-after", encodeCursor("x"), empty)
	require.Empty(t, lr.Sessions)
	require.NotNil(t, lr.Sessions, `"sessions": []`)
}

// noSummary hides a store's Summarizer (and everything but Timestamps),
// so that list reads each session on its own.
type noSummary struct {
	adapters.Store
	adapters.Timestamps
}

// The page summary gives list the rows reading each session gives: item
// counts, sizes, unreadable records, encrypted items, times, checkpoint
// states (the unreadable one too).
func TestListSummaryAgreesWithReads(t *testing.T) {
	dsn := checkpointStoreURL(t)
	seedCheckpointStore(t, dsn)
	seed(t, dsn, "enc", `{"n":1}`, `{"__enc__":1,"v":1,"kid":"hkdf-v1","payload":"AAAA"}`)
	ctx := context.Background()
	func() {
		st, err := adapters.Open(ctx, dsn)
		require.NoError(t, err)
		defer st.Close()
		for _, id := range []string{"plain", "broken", "enc"} {
			require.NoError(t, st.(driver.RawAppender).AppendRaw(ctx, id, []byte(`{"cut`)))
		}
	}()
	st, corrupt, err := openStore(ctx, dsn, readOnly, 10*time.Second)
	require.NoError(t, err)
	defer st.Close()
	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Len(t, ids, 9)
	_, ok := st.(adapters.Summarizer)
	require.True(t, ok)

	fast, failed, err := summarizePage(ctx, st, keyring{}, corrupt, ids)
	require.NoError(t, err)
	require.Zero(t, failed)
	slow, failed, err := summarizePage(ctx, noSummary{st, st.(adapters.Timestamps)}, keyring{}, corrupt, ids)
	require.NoError(t, err)
	require.Zero(t, failed)
	require.Equal(t, slow, fast)

	rows := map[string]listSession{}
	for _, ls := range fast {
		rows[ls.SessionID] = ls
	}
	require.Equal(t, 1, rows["plain"].CorruptRecords)
	require.Equal(t, 1, rows["enc"].Encrypted)
	require.Equal(t, 2, rows["enc"].Items)
	require.Equal(t, "unreadable,model", rows["broken"].Checkpoint)
	require.NotEmpty(t, rows["plain"].UpdatedAt)
	require.Contains(t, tableRow(rows["broken"]), "1 unreadable record (run doctor); 1 unreadable checkpoint (run inspect)")

	// ListSessions, Latest and All still agree with a page.
	s, err := st.Session("plain")
	require.NoError(t, err)
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Len(t, items, rows["plain"].Items)
}
