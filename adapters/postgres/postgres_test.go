package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// serverURL returns the shared test server's URL.
func serverURL(t testing.TB) string {
	t.Helper()
	return testservers.Postgres(t)
}

// freshSchema returns the name of a schema no other test uses, dropped
// with everything in it at the end of the test.
func freshSchema(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	url := serverURL(t)
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP SCHEMA IF EXISTS `+quote(name)+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// openStore opens a Store on the test server, closed at the end of the
// test. A zero opts.Schema gets a fresh schema.
func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	url := serverURL(t)
	if opts.Schema == "" {
		opts.Schema = freshSchema(t)
	}
	st, err := Open(context.Background(), url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// connect returns a plain pgx connection to the test server, closed at the
// end of the test.
func connect(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), serverURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// harness runs the conformance suite on one pair of tables: Open goes
// through one Store, OpenPeer through a second Store with its own pool, as
// another process would.
type harness struct {
	store, peer *Store
	corrupt     *driver.CorruptLog
}

func (h *harness) Name() string { return "postgres" }

// OpenClosed returns a handle on id in a Store of its own on the same
// pool, closed (conformance.Closer).
func (h *harness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := OpenPool(ctx, h.store.pool, h.store.opts)
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
	return session.Caps(session.CapLatest, session.CapReplace, session.CapVersionedReplace, session.CapCheckpoints, session.CapCheckpointCommit,
		session.CapFollow, session.CapAppendOnce)
}

// RemoveSession deletes what Clear keeps of a session: its checkpoints
// (conformance.Remover).
func (h *harness) RemoveSession(ctx context.Context, id string) error {
	return h.store.RemoveSession(ctx, id)
}

// AppendRaw stores raw through the Store's raw-write hook.
func (h *harness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return h.store.AppendRaw(ctx, id, raw)
}
func (h *harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

var (
	_ driver.RawAppender  = (*harness)(nil)
	_ conformance.Remover = (*harness)(nil)
)

func TestConformance(t *testing.T) {
	c := &driver.CorruptLog{}
	schema := freshSchema(t)
	h := &harness{corrupt: c}
	h.store = openStore(t, Options{Schema: schema, OnCorrupt: c.Handler()})
	h.peer = openStore(t, Options{Schema: schema, OnCorrupt: c.Handler()})
	require.Equal(t, h.Declared(), h.store.Declared(), "the Store declares what the harness does")
	rep := conformance.Run(t, h, conformance.Options{})
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
}
