package sqlite

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain removes the benchmarks' fixture files once every test and
// benchmark ran.
func TestMain(m *testing.M) {
	code := m.Run()
	removeFixtures()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
