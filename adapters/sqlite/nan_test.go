package sqlite

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// Python's json.dumps writes NaN, Infinity and -Infinity (allow_nan=True
// is its default) and json.loads reads them, so real Python stores hold
// them (issue 9.3): they are items, kept byte for byte, never corrupt.
var pythonTokens = []string{
	`{"x": NaN}`,
	`{"y": -Infinity}`,
	`{"type": "function_call_output", "call_id": "c1", "output": "ok", "score": Infinity, "all": [NaN, Infinity, -Infinity]}`,
}

func TestNaNRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, writer := range []string{"go", "python"} {
		t.Run("written by "+writer, func(t *testing.T) {
			f := newFixture(t)
			s := f.session(t, "nan")
			require.NoError(t, s.AddItems(ctx, numbered("before", 1)))
			if writer == "go" {
				its, err := session.ParseItems(pythonTokens...)
				require.NoError(t, err, "session accepts Python's tokens")
				require.NoError(t, s.AddItems(ctx, its))
			} else {
				for _, raw := range pythonTokens {
					require.NoError(t, insertRaw(ctx, f.st, "nan", []byte(raw)))
				}
			}
			want := append(texts(numbered("before", 1)), pythonTokens...)
			require.Equal(t, want, rawRows(t, f.st, "nan"), "stored byte for byte, as TEXT")
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, want, texts(got))
			latest, err := s.LatestItems(ctx, 2)
			require.NoError(t, err)
			require.Equal(t, want[len(want)-2:], texts(latest))
			for i := len(want) - 1; i >= 0; i-- {
				it, ok, err := s.PopItem(ctx)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, want[i], it.String(), "popped byte for byte")
			}
			require.Empty(t, rawRows(t, f.st, "nan"), "a NaN record is an item: popped, not left as unreadable")
			require.Empty(t, f.corrupt.Reports("nan"), "never reported as corrupt")
		})
	}
}

// TestNaNPythonReads hands Go-written NaN items to Python's sqlite3 and
// json modules, reading them with SQLiteSession's own SELECT and
// json.loads, and dumping them back with json.dumps: the same bytes. It
// needs python3; without one it is skipped (TestNaNRoundTrip still pins
// the Go side).
func TestNaNPythonReads(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(python, "-c", "import sqlite3, json").Run()
	}
	if err != nil {
		t.Skipf("no usable python3 (%v)", err)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nan.db")
	st := openStore(t, path, Options{})
	s, err := st.Session("nan")
	require.NoError(t, err)
	its, err := session.ParseItems(pythonTokens...)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, its))
	require.NoError(t, st.Close())

	const script = `
import json, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
rows = conn.execute("SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC", ("nan",)).fetchall()
for (data,) in rows:
    sys.stdout.write(json.dumps(json.loads(data)) + "\n")
`
	out, err := exec.Command(python, "-c", script, path).Output()
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	var got []string
	for _, l := range lines {
		got = append(got, string(l))
	}
	require.Equal(t, pythonTokens, got, "Python reads the Go-written items and dumps them back identically")
}
