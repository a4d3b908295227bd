package openaigo_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// TestHeldWriteWithCompaction runs the held-write conformance suite (the
// Python SDK's held and ordinary pending Session writes, with faults) with
// the compaction session around every backend: the wrapper keeps the
// backend's checkpoints and atomic commit, and every scenario ends with
// the exact history. Its compact requests go to the fake API. The
// scenarios run in their stored mode (the checkpoint kept in the store
// under test); the other two modes differ only in how the checkpoint
// travels, and the adapters' own suites run them.
func TestHeldWriteWithCompaction(t *testing.T) {
	api := newFakeAPI(t, e2eScript)
	client := newClient(api.URL())
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			wrap := func(s session.Session) (session.Session, error) {
				return openaigo.NewCompactionSession(s, &client, openaigo.CompactionOptions{})
			}
			opts := storetest.Options(b)
			opts.Run = regexp.MustCompile(`^held-write/.*/stored$`)
			rep := conformance.Run(t, storetest.NewHarness(t, b, wrap), opts)
			t.Logf("held-write with the compaction session over %s: %d passed, %d failed, %d skipped; compact requests so far %d", b.Name, rep.Passed, rep.Failed, rep.Skipped, len(api.compactions()))
			require.Equal(t, 0, rep.Failed)
			require.Equal(t, 48, rep.Passed, "every held-write scenario in its stored mode")
		})
	}
}
