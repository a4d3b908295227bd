package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// sessionctl runs the command in process and returns its exit status and
// output.
func sessionctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &env{stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func sqliteURL(t *testing.T, name string) string {
	return "sqlite://" + filepath.Join(t.TempDir(), name)
}

func seed(t *testing.T, dsn, id string, items ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session(id)
	require.NoError(t, err)
	its, err := session.ParseItems(items...)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, its))
}

func read(t *testing.T, dsn, id string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session(id)
	require.NoError(t, err)
	items, err := s.Items(ctx)
	require.NoError(t, err)
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func TestUsage(t *testing.T) {
	code, _, stderr := sessionctl(t)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "usage: sessionctl")
	code, _, stderr = sessionctl(t, "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "frobnicate"`)
	code, _, _ = sessionctl(t, "inspect", "memory://")
	require.Equal(t, 2, code)
	code, _, _ = sessionctl(t, "check", "-h")
	require.Equal(t, 0, code)
}

func TestBadStoreURLs(t *testing.T) {
	for _, dsn := range []string{"", "bogus://x", "nocolon", "sqlite://", "sqlite:///tmp/x.db?foo=1", "memory://?ttl=-1s", "sqlite:///tmp/x.db?busy_timeout=soon"} {
		code, _, stderr := sessionctl(t, "inspect", dsn, "id")
		require.Equal(t, 1, code, dsn)
		require.Contains(t, stderr, "invalid store URL", dsn)
	}
}

func TestMigrateIsAtomicPerSessionAndResumable(t *testing.T) {
	from, to := sqliteURL(t, "from.db"), sqliteURL(t, "to.db")
	seed(t, from, "a", `{"role":"user","content":"a1"}`, `{"role":"user","content":"a2"}`)
	seed(t, from, "b:{weird} id", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`, `{"type":"function_call_output","call_id":"c","output":"é"}`)
	seed(t, to, "a", `{"role":"user","content":"a1"}`, `{"role":"user","content":"a2"}`) // already migrated

	code, out, stderr := sessionctl(t, "migrate", "-offline", "--from", from, "--to", to)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "2 sessions: 1 copied, 1 already present, 0 failed")
	require.Equal(t, read(t, from, "b:{weird} id"), read(t, to, "b:{weird} id"))
	require.NotContains(t, stderr, "2/2 sessions", "no progress line for a run shorter than progressEvery when not on a terminal")

	code, out, _ = sessionctl(t, "migrate", "-offline", "--from", from, "--to", to)
	require.Equal(t, 0, code)
	require.Contains(t, out, "0 copied, 2 already present", "running it again copies nothing")

	seed(t, to, "a", `{"role":"user","content":"diverged"}`)
	code, out, stderr = sessionctl(t, "migrate", "-offline", "--from", from, "--to", to, "--session", "a")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "use --overwrite")
	require.Len(t, read(t, to, "a"), 3, "a refused session is left as it was")
	code, _, _ = sessionctl(t, "migrate", "-offline", "--from", from, "--to", to, "--session", "a", "--overwrite")
	require.Equal(t, 0, code)
	require.Equal(t, read(t, from, "a"), read(t, to, "a"))
	_ = out
}

func TestDoctorAndRepair(t *testing.T) {
	dsn := sqliteURL(t, "s.db")
	seed(t, dsn, "ok", `{"role":"user","content":"hi"}`)
	seed(t, dsn, "dead",
		`{"role":"user","content":"q"}`,
		`{"type":"function_call_output","call_id":"lost","output":"x"}`,
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`)

	code, out, _ := sessionctl(t, "doctor", dsn)
	require.Equal(t, 1, code)
	require.Contains(t, out, `error: session "dead" item 1: orphan-output (function_call lost)`)
	require.Contains(t, out, "2 sessions checked, 1 with errors")

	code, out, _ = sessionctl(t, "inspect", dsn, "dead")
	require.Equal(t, 1, code, "a severe problem is an error of the diagnosis")
	require.Contains(t, out, "<- orphan-output")

	code, out, _ = sessionctl(t, "repair", "--dry-run", dsn, "dead")
	require.Equal(t, 0, code)
	require.Contains(t, out, "dry run: 3 of 4 items would remain")
	require.Len(t, read(t, dsn, "dead"), 4)

	backup := filepath.Join(t.TempDir(), "backup.jsonl")
	code, out, stderr := sessionctl(t, "repair", "-apply", "-offline", "--backup", backup, dsn, "dead")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "repaired: 3 of 4 items remain")
	raw, err := os.ReadFile(backup)
	require.NoError(t, err)
	require.Equal(t, 4, strings.Count(string(raw), "\n"), "the backup holds every item read")

	code, out, _ = sessionctl(t, "doctor", dsn, "--session", "dead")
	require.Equal(t, 0, code, out)
	code, out, _ = sessionctl(t, "repair", "-apply", "-offline", dsn, "dead")
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to repair")
}

func TestBench(t *testing.T) {
	code, out, stderr := sessionctl(t, "bench", "-n", "5", "-history", "50", "memory://")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "latest-50")
	require.Contains(t, out, "append 20 items")
}
