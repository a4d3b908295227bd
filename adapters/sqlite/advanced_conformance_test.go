package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session/driver"
)

// advancedHarness runs the conformance suite on an AdvancedSQLiteSession
// store: raw records are appended as the class appends a row (a message
// row and its structure row), so that they are on the branch the
// sessions read.
type advancedHarness struct{ *harness }

func (h advancedHarness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return h.store.appendRaw(ctx, id, raw)
}

// TestConformanceAdvanced: the suite grades an AdvancedSQLiteSession
// store (made by the class's statements) FULL, as an ordinary one, with
// a peer Store on the same file; the class's cleanup then finds no row of
// Go's to delete.
func TestConformanceAdvanced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "advanced.db")
	py := newAdvancedPy(t, path, conformance.ProbePrefix+"none")
	c := &driver.CorruptLog{}
	h := &harness{name: "sqlite-advanced", corrupt: c}
	// Two Stores on one file wait for each other's locks; an advanced
	// store's writes do more (structure rows), so under a loaded race build
	// the default 5 s was once not enough for the two-handles clause.
	opts := Options{OnCorrupt: c.Handler(), BusyTimeout: 30 * time.Second}
	h.store = openStore(t, path, opts)
	h.peer = openStore(t, path, opts)
	require.True(t, h.store.isAdvanced())
	rep := conformance.Run(t, advancedHarness{h}, conformance.Options{})
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
	t.Log(rep.Summary())
	var structure, orphans int
	require.NoError(t, py.db.QueryRow(`SELECT count(*) FROM message_structure`).Scan(&structure))
	require.NoError(t, py.db.QueryRow(`SELECT count(*) FROM agent_messages m WHERE NOT EXISTS (SELECT 1 FROM message_structure s WHERE s.message_id = m.id)`).Scan(&orphans))
	require.Zero(t, orphans, "every message row Go left has its structure row")
}
