package adapters_test

import (
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// TestMain stops the test servers the paging tests started, and fails the
// run when a test leaves a goroutine behind (testservers.Main).
func TestMain(m *testing.M) { testservers.Main(m) }
