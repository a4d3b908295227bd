package dapr_test

import (
	"context"
	"testing"

	daprc "github.com/dapr/go-sdk/client"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/dapr"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// newClient dials the sidecar's gRPC API; the test closes it.
func newClient(tb testing.TB, addr string) daprc.Client {
	tb.Helper()
	c, err := daprc.NewClientWithAddressContext(context.Background(), addr)
	require.NoError(tb, err)
	tb.Cleanup(c.Close)
	return c
}

func newStore(tb testing.TB, c dapr.StateClient, opts dapr.Options) *dapr.Store {
	tb.Helper()
	st, err := dapr.New(c, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { st.Close() })
	return st
}

// harness runs the conformance suite on a daprd with a Redis state store:
// Open uses one gRPC connection, OpenPeer a second, independent one.
type harness struct {
	client  daprc.Client
	store   *dapr.Store
	peer    *dapr.Store
	opts    dapr.Options
	corrupt driver.CorruptLog
}

// conformanceAttempts is the harness's Options.MaxAttempts. The suite's
// concurrency clause runs 16 writers of 50 batches each on one session
// through two stores; with Python's 5 tries, the two stores' loops
// conflict 5 times running often enough that some batch fails with
// ErrConflict, as it would in Python (TestConflictExhaustion shows it).
const conformanceAttempts = 1000

func newHarness(t *testing.T) *harness {
	d := testservers.Daprd(t)
	h := &harness{client: newClient(t, d.GRPCAddr)}
	h.opts = dapr.Options{StoreName: d.StoreName, MaxAttempts: conformanceAttempts, OnCorrupt: h.corrupt.Handler()}
	h.store = newStore(t, h.client, h.opts)
	h.peer = newStore(t, newClient(t, d.GRPCAddr), h.opts)
	return h
}

func (h *harness) Name() string { return "dapr-redis" }
func (h *harness) Open(_ context.Context, id string) (session.Session, error) {
	return h.store.Session(id)
}
func (h *harness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.peer.Session(id)
}

// OpenClosed returns a handle on id in a Store of its own on the same
// client, closed (conformance.Closer).
func (h *harness) OpenClosed(_ context.Context, id string) (session.Session, error) {
	st, err := dapr.New(h.client, h.opts)
	if err != nil {
		return nil, err
	}
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	return s, st.Close()
}
func (h *harness) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapReplace, session.CapVersionedReplace)
}
func (h *harness) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return h.store.AppendRaw(ctx, id, raw)
}
func (h *harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }

var (
	_ driver.RawAppender          = (*harness)(nil)
	_ conformance.CorruptReporter = (*harness)(nil)
)

func TestConformance(t *testing.T) {
	h := newHarness(t)
	rep := conformance.Run(t, h, conformance.Options{})
	t.Logf("conformance (daprd %s, Redis %s): %s", testservers.DaprdKind(), testservers.RedisKind(), rep.Summary())
	require.Equal(t, conformance.LevelFull, rep.Level, "dapr must grade FULL: %s", rep.Summary())
}
