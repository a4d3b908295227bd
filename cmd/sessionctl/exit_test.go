package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// 22.1: every command's exit status, as docs/sessionctl.md states them: 0
// success, 1 a diagnosis found errors or the command failed, 2 a usage
// error. No command creates a store at a mistyped path.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	dsn := sqliteURL(t, "s.db")
	seed(t, dsn, "ok", `{"role":"user","content":"hi"}`)
	seed(t, dsn, "dead", `{"role":"user","content":"q"}`, `{"type":"function_call_output","call_id":"lost","output":"x"}`)
	missing := filepath.Join(dir, "nope2.db")
	nope := "sqlite://" + missing
	to := sqliteURL(t, "to.db")
	seed(t, to, "dead", `{"role":"user","content":"diverged"}`)

	for _, c := range []struct {
		name string
		args []string
		want int
		msg  string // in stdout or stderr
	}{
		{"list ok", []string{"list", dsn}, 0, "2 sessions"},
		{"list usage", []string{"list"}, 2, "want one store URL"},
		{"list runtime", []string{"list", nope}, 1, "does not exist"},

		{"inspect ok", []string{"inspect", dsn, "ok"}, 0, "0 problems (0 severe)"},
		{"inspect diagnosis", []string{"inspect", dsn, "dead"}, 1, "1 problem (1 severe)"},
		{"inspect usage", []string{"inspect", dsn}, 2, "want a store URL and a session id"},
		{"inspect runtime", []string{"inspect", nope, "ok"}, 1, "does not exist"},
		{"inspect no such session", []string{"inspect", dsn, "s1"}, 1, `no such session "s1"`},

		{"doctor ok", []string{"doctor", dsn, "--session", "ok"}, 0, "1 session checked, 0 with errors"},
		{"doctor diagnosis", []string{"doctor", dsn}, 1, "2 sessions checked, 1 with errors"},
		{"doctor usage", []string{"doctor", dsn, dsn}, 2, "want one store URL"},
		{"doctor runtime", []string{"doctor", nope}, 1, "does not exist"},
		{"doctor no such session", []string{"doctor", dsn, "--session", "s1"}, 1, `session "s1": no such session`},

		{"repair ok", []string{"repair", dsn, "ok"}, 0, "nothing to repair"},
		{"repair plan", []string{"repair", dsn, "dead"}, 0, "dry run: 1 of 2 items would remain"},
		{"repair usage", []string{"repair", "-apply", "-dry-run", dsn, "dead"}, 2, "exclude each other"},
		{"repair usage offline", []string{"repair", "-offline", dsn, "dead"}, 2, "-offline goes with -apply"},
		{"repair usage memory", []string{"repair", "-apply", "memory://", "s1"}, 2, "would vanish"},
		{"repair runtime", []string{"repair", "-apply", "-offline", nope, "s1"}, 1, "does not exist"},
		{"repair no such session", []string{"repair", "-apply", "-offline", "-backup", "-", dsn, "s1"}, 1, `no such session "s1"`},

		{"migrate ok", []string{"migrate", "-offline", "--from", dsn, "--to", sqliteURL(t, "new.db")}, 0, "2 copied"},
		{"migrate failed", []string{"migrate", "-offline", "--from", dsn, "--to", to, "--session", "dead"}, 1, "use --overwrite"},
		{"migrate usage", []string{"migrate", "--from", dsn}, 2, "both --from and --to are required"},
		{"migrate usage memory", []string{"migrate", "--from", dsn, "--to", "memory://"}, 2, "would vanish"},
		{"migrate runtime", []string{"migrate", "--from", nope, "--to", sqliteURL(t, "x.db")}, 1, "does not exist"},

		{"bench ok", []string{"bench", "-n", "2", "-history", "5", "memory://"}, 0, "latest-50"},
		{"bench usage", []string{"bench", "-n", "0"}, 2, "positive"},
		{"bench runtime", []string{"bench", "-n", "2", nope}, 1, "does not exist"},

		{"check usage", []string{"check", dsn, dsn}, 2, "at most one store URL"},
		{"check runtime", []string{"check", nope}, 1, "does not exist"},
		{"check usage min-ttl", []string{"check", "-min-ttl", "0", "memory://"}, 2, "-min-ttl must be at least 1ms"},
		{"check failed", []string{"check", "-run", "^core/order$", "-native-only", "-timeout", "1ns", "memory://"}, 1, ""},

		{"demo usage", []string{"demo", "extra"}, 2, "takes no arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := sessionctl(t, c.args...)
			require.Equal(t, c.want, code, "%s%s", out, stderr)
			require.Contains(t, out+stderr, c.msg)
			require.NoFileExists(t, missing, "a command created the store at the mistyped path")
		})
	}
	_, err := os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist)
}
