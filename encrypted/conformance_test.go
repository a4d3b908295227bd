package encrypted_test

import (
	"testing"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// TestConformance runs the whole suite (contract, contract with
// capabilities hidden, held-write settlement) through the wrapper on every
// backend.
func TestConformance(t *testing.T) {
	keys := []encrypted.Key{{ID: "2026", Secret: "conformance master key"}, {Secret: "cw_0x689RpI-jtRR7oE8h_eQsKImvJapLeSbXpwF4e4="}}
	wrap := func(s session.Session) (session.Session, error) {
		return encrypted.New(s, encrypted.Options{Keys: keys})
	}
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			h := storetest.NewHarness(t, b, wrap)
			rep := conformance.Run(t, h, storetest.Options(b))
			t.Logf("encrypted over %s:\n%s", b.Name, rep.Summary())
			for _, p := range rep.Parts {
				if storetest.Graded(b, p.Name) && p.Level != conformance.LevelFull {
					t.Errorf("%s: part %s graded %s", b.Name, p.Name, p.Level)
				}
			}
		})
	}
}
