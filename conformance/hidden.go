package conformance

import (
	"context"

	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
)

// HideCapabilities returns a harness whose sessions have every optional
// capability hidden (legacy.Hide) and that declares none, so the suite runs
// again through the session package's fallbacks. Run does this for every
// harness; Check callers use it to grade the fallback path.
func HideCapabilities(h Harness) Harness {
	base := hiddenHarness{h}
	if rw, ok := h.(RawWriter); ok {
		return hiddenRawHarness{base, rw}
	}
	return base
}

type hiddenHarness struct{ h Harness }

func (x hiddenHarness) Name() string { return x.h.Name() + " (capabilities hidden)" }
func (x hiddenHarness) Open(ctx context.Context, id string) (session.Session, error) {
	s, err := x.h.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	return legacy.Hide(s), nil
}
func (x hiddenHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	s, err := x.h.OpenPeer(ctx, id)
	if err != nil {
		return nil, err
	}
	return legacy.Hide(s), nil
}
func (x hiddenHarness) Declared() session.Capabilities { return 0 }

type hiddenRawHarness struct {
	hiddenHarness
	RawWriter
}
