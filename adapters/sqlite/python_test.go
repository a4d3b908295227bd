package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentsessions/sessions/session/driver"
	"github.com/stretchr/testify/require"
)

// testdata/python/session.db was written by testdata/python/make_db.py
// (python3 make_db.py session.db expected.json) with Python's sqlite3 and
// json modules, following the SDK's SQLiteSession statement for statement;
// expected.json holds the json.dumps strings it stored.

type pythonExpected struct {
	SQLiteVersion string `json:"sqlite_version"`
	Sessions      []struct {
		ID      string   `json:"id"`
		Items   []string `json:"items"`
		Corrupt []string `json:"corrupt"`
	} `json:"sessions"`
}

// pythonFile copies the Python-written database to a temporary directory
// (opening it writes -wal and -shm files beside it) and returns its path
// and the expected contents.
func pythonFile(t *testing.T) (string, pythonExpected) {
	t.Helper()
	var exp pythonExpected
	raw, err := os.ReadFile(filepath.Join("testdata", "python", "expected.json"))
	require.NoError(t, err, "fixture testdata/python/expected.json")
	require.NoError(t, json.Unmarshal(raw, &exp))
	require.NotEmpty(t, exp.Sessions)
	db, err := os.ReadFile(filepath.Join("testdata", "python", "session.db"))
	require.NoError(t, err, "fixture testdata/python/session.db")
	path := filepath.Join(t.TempDir(), "python.db")
	require.NoError(t, os.WriteFile(path, db, 0o600))
	return path, exp
}

func TestPythonWrittenFile(t *testing.T) {
	ctx := context.Background()
	path, exp := pythonFile(t)
	c := &driver.CorruptLog{}
	st := openStore(t, path, Options{OnCorrupt: c.Handler()})
	for _, es := range exp.Sessions {
		t.Run(es.ID, func(t *testing.T) {
			s, err := st.Session(es.ID)
			require.NoError(t, err)
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, es.Items, texts(got), "items read back byte for byte as json.dumps wrote them")
			for n := 1; n <= len(es.Items)+1; n++ {
				latest, err := s.LatestItems(ctx, n)
				require.NoError(t, err)
				require.Equal(t, es.Items[max(0, len(es.Items)-n):], texts(latest), "latest %d", n)
			}
			var raws []string
			for _, r := range c.Reports(es.ID) {
				raws = append(raws, string(r.Raw))
			}
			if len(es.Corrupt) > 0 {
				require.Contains(t, raws, es.Corrupt[0], "the damaged row is reported with its bytes")
			} else {
				require.Empty(t, raws)
			}

			// Go appends after Python's rows and pops them like Python.
			more := items(t, `{"from":"go"}`)
			require.NoError(t, s.AddItems(ctx, more))
			got, err = s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, append(append([]string{}, es.Items...), more[0].String()), texts(got))
			it, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, more[0].String(), it.String())
			it, ok, err = s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, es.Items[len(es.Items)-1], it.String(), "pop returns Python's newest item")
		})
	}
}

// schemaOf describes a database's session schema in terms that do not
// depend on how the DDL was spelled: the PRAGMA views of both tables, their
// indexes and foreign keys, and the stored DDL with quotes dropped and
// white space collapsed.
func schemaOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	dump := func(label, query string) {
		rows, err := db.QueryContext(ctx, query)
		require.NoError(t, err, query)
		cols, err := rows.Columns()
		require.NoError(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			line := label + ":"
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				line += fmt.Sprintf(" %s=%v", cols[i], v)
			}
			out = append(out, line)
		}
		require.NoError(t, closeRows(rows))
	}
	for _, tbl := range []string{"agent_sessions", "agent_messages"} {
		dump("table_info "+tbl, "PRAGMA table_info("+tbl+")")
		dump("index_list "+tbl, "PRAGMA index_list("+tbl+")")
		dump("foreign_key_list "+tbl, "PRAGMA foreign_key_list("+tbl+")")
	}
	dump("index_xinfo", "PRAGMA index_xinfo(idx_agent_messages_session_id)")
	// The checkpoints and operation-id tables are this package's own (Python never reads them):
	// TestCheckpointsTableLayout pins it.
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name, sql FROM sqlite_master
        WHERE sql IS NOT NULL AND tbl_name NOT IN ('agent_checkpoints', 'agent_messages_operations') ORDER BY type, name`)
	require.NoError(t, err)
	space := regexp.MustCompile(`\s+`)
	for rows.Next() {
		var typ, name, tbl, ddl string
		require.NoError(t, rows.Scan(&typ, &name, &tbl, &ddl))
		ddl = strings.TrimSpace(space.ReplaceAllString(strings.ReplaceAll(ddl, `"`, ""), " "))
		out = append(out, fmt.Sprintf("sqlite_master: %s %s on %s: %s", typ, name, tbl, ddl))
	}
	require.NoError(t, closeRows(rows))
	return out
}

func TestSchemaMatchesPython(t *testing.T) {
	pyPath, _ := pythonFile(t)
	py, err := sql.Open("sqlite", pyPath)
	require.NoError(t, err)
	defer py.Close()
	goStore := openStore(t, filepath.Join(t.TempDir(), "go.db"), Options{})
	want, got := schemaOf(t, py), schemaOf(t, goStore.DB())
	require.NotEmpty(t, want)
	require.Equal(t, want, got, "the Go-created schema is the Python-created one")
	t.Logf("schema:\n%s", strings.Join(got, "\n"))
}

// TestPythonReadsGoFile hands a Go-written file to Python's sqlite3 and
// json modules (testdata/python/check_go_db.py runs SQLiteSession's
// statements on it), then reads back what Python wrote and popped. It needs
// a python3 with the standard library; without one it is skipped, and the
// schema check above still pins the layout.
func TestPythonReadsGoFile(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import sqlite3, json").Run()
	}
	if err != nil {
		t.Skipf("no usable python3 (%v); the reverse check was run by hand at development time", err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "go.db")
	st := openStore(t, path, Options{})
	sessions := map[string][]string{
		"go-1": {
			`{"type":"message","role":"user","content":"héllo ☃ 😀 \u00e9"}`,
			`{ "spaced" : [ 1 , 2 ] }`,
			`{"n":1.0e2,"big":123456789012345678901234567890,"neg":-0.0,"dup":1,"dup":2}`,
		},
		`go:'"%_ ☃` + "\x01": {`{"a":1}`, `{"b":2}`, `{"c":3}`},
	}
	type sessionJSON struct {
		ID    string   `json:"id"`
		Items []string `json:"items"`
	}
	var spec struct {
		Sessions []sessionJSON `json:"sessions"`
		Append   struct {
			ID   string          `json:"id"`
			Item json.RawMessage `json:"item"`
		} `json:"append"`
		Pop string `json:"pop"`
	}
	for id, its := range sessions {
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, items(t, its...)))
		spec.Sessions = append(spec.Sessions, sessionJSON{id, its})
	}
	spec.Append.ID = "go-1"
	spec.Append.Item = json.RawMessage(`{"role":"assistant","content":"from Python ☃"}`)
	spec.Pop = `go:'"%_ ☃` + "\x01"
	specJSON, err := json.Marshal(spec)
	require.NoError(t, err)
	specPath := filepath.Join(dir, "expected.json")
	require.NoError(t, os.WriteFile(specPath, specJSON, 0o600))

	cmd := exec.Command(python, filepath.Join("testdata", "python", "check_go_db.py"), path, specPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "python: %s", stderr.String())
	var res struct{ Appended, Popped string }
	require.NoError(t, json.Unmarshal(out, &res))

	s, err := st.Session("go-1")
	require.NoError(t, err)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, append(append([]string{}, sessions["go-1"]...), res.Appended), texts(got), "Go reads what Python appended")
	require.Equal(t, `{"role": "assistant", "content": "from Python \u2603"}`, res.Appended)
	p, err := st.Session(spec.Pop)
	require.NoError(t, err)
	got, err = p.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"a":1}`, `{"b":2}`}, texts(got), "Python's pop took Go's newest item")
	require.Equal(t, `{"c":3}`, res.Popped)
}
