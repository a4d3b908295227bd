package events_test

import (
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// TestMain stops the test servers (Redis, PostgreSQL, the Mongo-wire
// server) the backends started.
func TestMain(m *testing.M) { testservers.Main(m) }
