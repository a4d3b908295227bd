// Package sharedfiles locates the project's shared folder (../shared beside
// the repository root: specs, Python-written fixtures, digest golden
// vectors) for tests. A missing file fails the test; it is never skipped.
package sharedfiles

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/agentsessions/sessions"

// Dir returns the shared folder: ../shared from the repository root, the
// nearest directory above the working directory whose go.mod declares this
// module.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("sharedfiles: %v", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == module {
			return filepath.Join(dir, "..", "shared")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("sharedfiles: no go.mod of %s above the working directory", module)
		}
		dir = parent
	}
}

// Path returns the path of a file under the shared folder.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{Dir(tb)}, elem...)...)
}

// Read returns a file under the shared folder, failing the test when it is
// missing.
func Read(tb testing.TB, elem ...string) []byte {
	tb.Helper()
	p := Path(tb, elem...)
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatalf("sharedfiles: the shared file %s is required: %v", p, err)
	}
	return b
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return f[1]
		}
	}
	return ""
}
