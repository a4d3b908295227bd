package memory

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// fakeClock is a clock the TTL clauses move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

type harness struct {
	store   *Store
	clock   *fakeClock
	corrupt driver.CorruptLog
	ttl     map[time.Duration]*Store
	mu      sync.Mutex
}

func newHarness() *harness {
	h := &harness{clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, ttl: map[time.Duration]*Store{}}
	h.store = New(Options{OnCorrupt: h.corrupt.Handler()})
	return h
}

func (h *harness) Name() string { return "memory" }

// OpenClosed returns a handle on id in a store of its own, closed
// (conformance.Closer).
func (h *harness) OpenClosed(_ context.Context, id string) (session.Session, error) {
	st := New(Options{})
	if err := st.Close(); err != nil {
		return nil, err
	}
	return st.Session(id)
}
func (h *harness) Open(_ context.Context, id string) (session.Session, error) {
	return h.store.Session(id)
}
func (h *harness) OpenPeer(_ context.Context, id string) (session.Session, error) {
	return h.store.Session(id)
}
func (h *harness) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapCheckpointCommit, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce)
}

// RemoveSession removes what a clause left, operation ids included
// (conformance.Remover).
func (h *harness) RemoveSession(ctx context.Context, id string) error {
	return h.store.RemoveSession(ctx, id)
}
func (h *harness) AppendRaw(_ context.Context, id string, raw []byte) error {
	s, err := h.store.Session(id)
	if err != nil {
		return err
	}
	s.appendRaw(raw)
	return nil
}
func (h *harness) CorruptReports(id string) []driver.CorruptRecord { return h.corrupt.Reports(id) }
func (h *harness) OpenTTL(_ context.Context, id string, ttl time.Duration) (session.Session, error) {
	h.mu.Lock()
	st := h.ttl[ttl]
	if st == nil {
		st = New(Options{TTL: ttl, Now: h.clock.Now})
		h.ttl[ttl] = st
	}
	h.mu.Unlock()
	return st.Session(id)
}
func (h *harness) Advance(d time.Duration) { h.clock.Advance(d) }
func (h *harness) MinTTL() time.Duration   { return time.Second }

func TestConformance(t *testing.T) {
	rep := conformance.Run(t, newHarness(), conformance.Options{})
	if rep.Level != conformance.LevelFull {
		t.Errorf("memory must grade FULL, got %s", rep.Summary())
	}
}
