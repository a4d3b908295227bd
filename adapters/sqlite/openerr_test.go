package sqlite_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/sqlite"
)

// TestOpenFileSaysWhatIsWrong: each bad path gets an error naming the path
// and the cause, once, and creates nothing.
func TestOpenFileSaysWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain.txt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	for _, tc := range []struct {
		path, want string
		is         error
	}{
		{filepath.Join(dir, "nope", "x.db"), `sqlite: open "` + filepath.Join(dir, "nope", "x.db") + `": directory "` + filepath.Join(dir, "nope") + `": no such file or directory`, fs.ErrNotExist},
		{dir, `sqlite: open "` + dir + `": is a directory, not a database file`, nil},
		{"sqlite:///" + filepath.Join(dir, "x.db"), `that is a URL, not a file path: give it to adapters.Open, or give OpenFile the path`, sqlite.ErrInvalidOptions},
		{filepath.Join(file, "x.db"), `sqlite: open "` + filepath.Join(file, "x.db") + `": not a directory`, nil},
	} {
		_, err := sqlite.OpenFile(ctx, tc.path, sqlite.Options{})
		require.Error(t, err, tc.path)
		require.Contains(t, err.Error(), tc.want)
		require.Equal(t, 1, strings.Count(err.Error(), "sqlite: "), "one prefix: %v", err)
		if tc.is != nil {
			require.True(t, errors.Is(err, tc.is), "%v is %v", err, tc.is)
		}
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing created")
}
