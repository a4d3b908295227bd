package openaigo_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// SQLiteSession's statements (src/agents/memory/sqlite_session.py,
// get_items): the whole history, and the newest-first limited read the
// SDK reverses.
const (
	pyGetItems      = "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC"
	pyGetItemsLimit = "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?"
)

// pyRows runs a SQLiteSession read and returns message_data in get_items
// order.
func pyRows(t *testing.T, db *sql.DB, sid string, limit int) []string {
	t.Helper()
	var rows *sql.Rows
	var err error
	if limit < 0 {
		rows, err = db.Query(pyGetItems, sid)
	} else {
		rows, err = db.Query(pyGetItemsLimit, sid, limit)
	}
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	if limit >= 0 {
		slices.Reverse(out)
	}
	return out
}

// TestPythonSQLiteSessionReads: the file the integration wrote (the
// end-to-end conversation, the fixtures, an approval conversation with
// its checkpoint) read with SQLiteSession's own statements, from Go and,
// when a python3 is installed, by Python's sqlite3 and json modules.
func TestPythonSQLiteSessionReads(t *testing.T) {
	ctx := context.Background()
	l := runE2E(t, openaigo.Everything)
	path := strings.TrimPrefix(l.dsn, "sqlite://")

	st, err := adapters.Open(ctx, l.dsn)
	require.NoError(t, err)
	s, err := st.Session("fixtures")
	require.NoError(t, err)
	h := openaigo.New(s, openaigo.Options{})
	var raws []json.RawMessage
	for _, line := range fixtureLines(t) {
		raws = append(raws, json.RawMessage(line))
	}
	require.NoError(t, h.AddJSON(ctx, raws...))
	a, err := st.Session("approval-1")
	require.NoError(t, err)
	api := newFakeAPI(t, approvalAPI)
	require.NoError(t, approvalLoop(ctx, a, newClient(api.URL()), 2, noTools, func(string) {}))
	want := map[string][]string{}
	for _, sid := range []string{"conversation-1", "fixtures", "approval-1"} {
		s, err := st.Session(sid)
		require.NoError(t, err)
		all, err := session.All(ctx, s)
		require.NoError(t, err)
		want[sid] = texts(all)
	}
	require.NoError(t, st.Close())
	require.Len(t, want["conversation-1"], l.historyLen)
	require.Len(t, want["fixtures"], len(raws))
	require.Len(t, want["approval-1"], 18)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var summary []string
	for sid, items := range want {
		got := pyRows(t, db, sid, -1)
		require.Equal(t, items, got, "%s: get_items reads every item as stored", sid)
		for _, g := range got {
			require.True(t, json.Valid([]byte(g)), "json.loads reads %s", g)
		}
		for n := 1; n <= len(items); n++ {
			require.Equal(t, items[len(items)-n:], pyRows(t, db, sid, n), "%s: get_items(limit=%d)", sid, n)
		}
		summary = append(summary, sid+": "+itoa(len(got)))
	}
	slices.Sort(summary)
	t.Logf("SQLiteSession's statements from Go: %s rows, byte for byte, every limit", strings.Join(summary, ", "))

	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import sqlite3, json").Run()
	}
	if err != nil {
		t.Skipf("no usable python3 (%v); the statements were issued from Go above", err)
	}
	cmd := exec.Command(python, filepath.Join("testdata", "python", "read_items.py"), path, "conversation-1", "fixtures", "approval-1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "python: %s", stderr.String())
	var res map[string]struct {
		Raw      []string `json:"raw"`
		Decoded  int      `json:"decoded"`
		LimitsOK bool     `json:"limits_ok"`
	}
	require.NoError(t, json.Unmarshal(out, &res))
	summary = nil
	for sid, items := range want {
		r := res[sid]
		require.Equal(t, items, r.Raw, "%s: Python's get_items reads every item byte for byte", sid)
		require.Equal(t, len(items), r.Decoded, "%s: json.loads reads every row", sid)
		require.True(t, r.LimitsOK, "%s: every get_items(limit=n) is the tail", sid)
		summary = append(summary, sid+": "+itoa(r.Decoded)+"/"+itoa(len(items)))
	}
	slices.Sort(summary)
	t.Logf("Python's SQLiteSession.get_items (sqlite3 + json.loads): %s rows decoded, raw text identical, every limit equal", strings.Join(summary, ", "))
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
