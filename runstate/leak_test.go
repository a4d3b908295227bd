package runstate_test

import (
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// TestMain fails the run when a test leaves a goroutine behind, and stops
// the servers the benchmarks of the server backends started
// (BenchmarkRunTurnRatio).
func TestMain(m *testing.M) { testservers.Main(m) }
