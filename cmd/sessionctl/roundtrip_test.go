package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// copyFile copies a checked-in database so the test never writes to it.
func copyFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.WriteFile(dst, b, 0o600))
	return dst
}

// TestMigratePythonSQLiteThroughRedisAndBack moves a SQLiteSession file
// that Python's sqlite3 and json modules wrote to Redis (native layout and
// the Python SDK's RedisSession layout) and back into a new Python-layout
// file, and compares every item byte for byte. The file holds one
// deliberately truncated record in conversation-1: migrate copies that
// session's readable items, names the record, and fails the session (exit
// 1), on every run, until the source is repaired.
func TestMigratePythonSQLiteThroughRedisAndBack(t *testing.T) {
	src := "sqlite://" + copyFile(t, filepath.Join("..", "..", "adapters", "sqlite", "testdata", "python", "session.db"))
	redisURL := testservers.Redis(t)
	ids := []string{"conversation-1", "unicode ünï ☃ 😀", "user:42' OR '1'='1"}

	for _, layout := range []string{"native", "python"} {
		t.Run(layout, func(t *testing.T) {
			mid := redisURL + "?layout=" + layout + "&key_prefix=roundtrip-" + layout
			back := sqliteURL(t, "back.db")

			code, out, stderr := sessionctl(t, "migrate", "-offline", "--from", src, "--to", mid)
			require.Equal(t, 1, code, stderr)
			require.Contains(t, out, "3 sessions: 2 copied, 0 already present, 1 failed")
			require.Contains(t, stderr, `session "conversation-1": unreadable record`, "the record is named")

			code, out, stderr = sessionctl(t, "migrate", "-offline", "--from", mid, "--to", back)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, "3 sessions: 3 copied", "the Redis store lists what it holds")

			for _, id := range ids {
				want := read(t, src, id)
				require.NotEmpty(t, want, id)
				require.Equal(t, want, read(t, mid, id), "%s in redis (%s layout)", id, layout)
				require.Equal(t, want, read(t, back, id), "%s back in sqlite", id)
			}
			// Python wrote json.dumps(item): ", " and ": " separators and \u escapes survive untouched.
			first := read(t, back, "unicode ünï ☃ 😀")[0]
			require.True(t, bytes.Contains([]byte(first), []byte(`\u`)) || bytes.Contains([]byte(first), []byte(`": "`)), first)

			code, out, _ = sessionctl(t, "migrate", "-offline", "--from", src, "--to", mid)
			require.Equal(t, 1, code)
			require.Contains(t, out, "0 copied, 2 already present, 1 failed", "a second run finds the whole sessions in place, and does not call the incomplete one present")
		})
	}
}
