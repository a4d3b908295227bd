package sqlite

import (
	"os"
	"testing"
)

// TestMain removes the benchmarks' fixture files once every test and
// benchmark ran.
func TestMain(m *testing.M) {
	code := m.Run()
	removeFixtures()
	os.Exit(code)
}
