package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// harness runs the conformance suite on one database: Open goes through
// one Store, OpenPeer through a second Store with its own *sql.DB and
// connections on the same database, as another process would.
type harness struct {
	name    string
	store   *Store
	peer    *Store
	corrupt *driver.CorruptLog
}

func (h *harness) Name() string { return h.name }

// OpenClosed returns a handle on id in a Store of its own, closed
// (conformance.Closer).
func (h *harness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := OpenFile(ctx, ":memory:", h.store.opts)
	if err != nil {
		return nil, err
	}
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	return s, st.Close()
}
func (h *harness) Open(_ context.Context, id string) (session.Session, error) {
	return h.store.Session(id)
}
func (h *harness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.peer.Session(id)
}
func (h *harness) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapReplace, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce)
}

// RemoveSession deletes what Clear keeps of a session: its checkpoints
// (conformance.Remover).
func (h *harness) RemoveSession(ctx context.Context, id string) error {
	return h.store.RemoveSession(ctx, id)
}

var _ conformance.Remover = (*harness)(nil)

// AppendRaw inserts raw as the session's next row with plain SQL, as a
// foreign writer (or a damaged file) could leave it.
func (h *harness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return insertRaw(ctx, h.store, id, raw)
}
func (h *harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

// insertRaw stores raw, unvalidated, as TEXT in the next row of session id.
func insertRaw(ctx context.Context, st *Store, id string, raw []byte) error {
	_, err := st.DB().ExecContext(ctx, `INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)`, id)
	if err != nil {
		return err
	}
	_, err = st.DB().ExecContext(ctx, `INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)`, id, string(raw))
	return err
}

func openStore(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	st, err := OpenFile(context.Background(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

func TestConformanceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conformance.db")
	c := &driver.CorruptLog{}
	h := &harness{name: "sqlite-file", corrupt: c}
	h.store = openStore(t, path, Options{OnCorrupt: c.Handler()})
	h.peer = openStore(t, path, Options{OnCorrupt: c.Handler()})
	rep := conformance.Run(t, h, conformance.Options{})
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
}

// TestConformanceMemory runs the suite on a private ":memory:" database.
// Such a database is reachable only through the one connection of the
// Store that opened it, so no second Store can be its peer: OpenPeer
// hands out a second handle of the same Store. The shared-cache variant
// below has a true peer.
func TestConformanceMemory(t *testing.T) {
	c := &driver.CorruptLog{}
	h := &harness{name: "sqlite-memory", corrupt: c}
	h.store = openStore(t, ":memory:", Options{OnCorrupt: c.Handler()})
	h.peer = h.store
	rep := conformance.Run(t, h, conformance.Options{})
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
}

// TestConformanceSharedMemory runs the suite on a named shared-cache
// in-memory database, with a second Store as the peer.
func TestConformanceSharedMemory(t *testing.T) {
	uri := "file:conformance-" + t.Name() + "?mode=memory&cache=shared"
	c := &driver.CorruptLog{}
	h := &harness{name: "sqlite-shared-memory", corrupt: c}
	h.store = openStore(t, uri, Options{OnCorrupt: c.Handler()})
	h.peer = openStore(t, uri, Options{OnCorrupt: c.Handler()})
	rep := conformance.Run(t, h, conformance.Options{})
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
}
