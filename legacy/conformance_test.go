package legacy_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/memory" // registers memory://
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// limitRefHarness: FromLimitSession over the in-package reference
// implementation of the nlpodyssey shape, with raw writes for the
// corrupt-record clause.
type limitRefHarness struct {
	store   *limitStore
	corrupt driver.CorruptLog
}

func (h *limitRefHarness) Name() string { return "legacy.FromLimitSession(reference nlpodyssey shape)" }
func (h *limitRefHarness) open(id string) session.Session {
	return legacy.FromLimitSessionWith[json.RawMessage](h.store.session(id),
		legacy.LimitOptions[json.RawMessage]{OnCorrupt: h.corrupt.Handler()})
}
func (h *limitRefHarness) Open(_ context.Context, id string) (session.Session, error) {
	return h.open(id), nil
}
func (h *limitRefHarness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.open(id), nil
}
func (h *limitRefHarness) Declared() session.Capabilities { return session.Caps(session.CapLatest) }
func (h *limitRefHarness) AppendRaw(_ context.Context, id string, raw []byte) error {
	h.store.appendRaw(id, raw)
	return nil
}
func (h *limitRefHarness) CorruptReports(id string) []driver.CorruptRecord {
	return h.corrupt.Reports(id)
}

// memRaw is a memory store opened through its URL, which gives it a
// raw-write hook (driver.RawAppender), with its corrupt reports collected,
// so the corrupt-record clause runs under the shims.
type memRaw struct {
	store   adapters.Store
	corrupt *driver.CorruptLog
}

func newMemRaw() memRaw {
	c := &driver.CorruptLog{}
	st, err := adapters.OpenWith(context.Background(), "memory://", adapters.Options{OnCorrupt: c.Handler()})
	if err != nil {
		panic(err)
	}
	return memRaw{st, c}
}

func (m memRaw) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return m.store.(driver.RawAppender).AppendRaw(ctx, id, raw)
}
func (m memRaw) CorruptReports(id string) []driver.CorruptRecord { return m.corrupt.Reports(id) }

// roundTripHarness: FromLimitSession(ToLimitSession(memory session)), both
// directions of the shim stacked on the reference adapter.
type roundTripHarness struct{ memRaw }

func (h roundTripHarness) Name() string {
	return "legacy.FromLimitSession(legacy.ToLimitSession(memory))"
}
func (h roundTripHarness) Open(_ context.Context, id string) (session.Session, error) {
	s, err := h.store.Session(id)
	if err != nil {
		return nil, err
	}
	return legacy.FromLimitSession(legacy.ToLimitSession[json.RawMessage](s, nil), nil), nil
}
func (h roundTripHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h roundTripHarness) Declared() session.Capabilities { return session.Caps(session.CapLatest) }

// plainRefHarness: FromPlain over the reference context-free session.
type plainRefHarness struct {
	store   *plainStore
	corrupt *driver.CorruptLog
}

func newPlainRefHarness() *plainRefHarness {
	c := &driver.CorruptLog{}
	return &plainRefHarness{store: newPlainStore(c.Handler()), corrupt: c}
}

func (h *plainRefHarness) Name() string { return "legacy.FromPlain(reference plain session)" }
func (h *plainRefHarness) Open(_ context.Context, id string) (session.Session, error) {
	return legacy.FromPlain(h.store.session(id)), nil
}
func (h *plainRefHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h *plainRefHarness) Declared() session.Capabilities { return 0 }
func (h *plainRefHarness) AppendRaw(_ context.Context, id string, raw []byte) error {
	h.store.appendRaw(id, raw)
	return nil
}
func (h *plainRefHarness) CorruptReports(id string) []driver.CorruptRecord {
	return h.corrupt.Reports(id)
}

// plainRoundTripHarness: FromPlain(ToPlain(memory session)).
type plainRoundTripHarness struct{ memRaw }

func (h plainRoundTripHarness) Name() string { return "legacy.FromPlain(legacy.ToPlain(memory))" }
func (h plainRoundTripHarness) Open(_ context.Context, id string) (session.Session, error) {
	s, err := h.store.Session(id)
	if err != nil {
		return nil, err
	}
	return legacy.FromPlain(legacy.ToPlain(s)), nil
}
func (h plainRoundTripHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h plainRoundTripHarness) Declared() session.Capabilities { return 0 }

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		h    conformance.Harness
		want conformance.Level
	}{
		// LatestReader without Replacer: BASE+PARTIAL.
		{&limitRefHarness{store: newLimitStore()}, conformance.LevelBasePartial},
		{roundTripHarness{newMemRaw()}, conformance.LevelBasePartial},
		// No optional capability: BASE.
		{newPlainRefHarness(), conformance.LevelBase},
		{plainRoundTripHarness{newMemRaw()}, conformance.LevelBase},
	} {
		t.Run(tc.h.Name(), func(t *testing.T) {
			rep := conformance.Run(t, tc.h, conformance.Options{})
			require.NotNil(t, rep)
			assert.Equal(t, tc.want, rep.Level, rep.Summary())
			assert.Zero(t, rep.Failed, rep.Summary())
			hidden := conformance.Check(context.Background(), conformance.HideCapabilities(tc.h), conformance.Options{})
			assert.Equal(t, conformance.LevelBase, hidden.Level, hidden.Summary())
			assert.Zero(t, hidden.Failed, hidden.Summary())
			t.Logf("native: %s", rep.Summary())
			t.Logf("hidden: %s", hidden.Summary())
		})
	}
}

// The corrupt-record clause must run (not skip) on the harnesses that can
// plant garbage, so the shim's skip-and-report path is graded.
func TestConformanceCorruptClauseRuns(t *testing.T) {
	for _, h := range []conformance.Harness{&limitRefHarness{store: newLimitStore()}, newPlainRefHarness()} {
		rep := conformance.Check(context.Background(), h, conformance.Options{})
		var found bool
		for _, c := range rep.Clauses {
			if c.Name == "corrupt/isolated" {
				found = true
				assert.Equal(t, conformance.StatusPass, c.Status, "%s: %s", h.Name(), c.Message)
			}
		}
		assert.True(t, found, h.Name())
	}
}
