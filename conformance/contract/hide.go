package contract

import (
	"context"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// HideCapabilities returns a harness whose sessions show only the five
// methods of session.Session and that declares no capability (the
// checkpoint methods of session.CheckpointStore and CheckpointCommitter
// are hidden with the others), so the contract runs again through the
// session package's fallbacks: the legacy no-argument path. The
// harness's raw-write hook (driver.RawAppender) and corrupt reports
// (suite.CorruptReporter) pass through; its TTL hook does not, as no TTL
// is declared.
func HideCapabilities(h suite.Harness) suite.Harness {
	base := hiddenHarness{h}
	rw, okRaw := h.(driver.RawAppender)
	cr, okReports := h.(suite.CorruptReporter)
	if okRaw && okReports {
		return hiddenRawHarness{base, rw, cr}
	}
	return base
}

// Hide returns s with every optional capability hidden: only the five
// methods of session.Session remain.
func Hide(s session.Session) session.Session { return coreOnly{s} }

type hiddenHarness struct{ h suite.Harness }

func (x hiddenHarness) Name() string { return x.h.Name() + " (capabilities hidden)" }
func (x hiddenHarness) Open(ctx context.Context, id string) (session.Session, error) {
	s, err := x.h.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	return Hide(s), nil
}
func (x hiddenHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	s, err := x.h.OpenPeer(ctx, id)
	if err != nil {
		return nil, err
	}
	return Hide(s), nil
}
func (x hiddenHarness) Declared() session.Capabilities { return 0 }

// RemoveSession passes the harness's suite.Remover through, so the
// hidden pass leaves nothing behind either.
func (x hiddenHarness) RemoveSession(ctx context.Context, id string) error {
	if r, ok := x.h.(suite.Remover); ok {
		return r.RemoveSession(ctx, id)
	}
	return nil
}

type hiddenRawHarness struct {
	hiddenHarness
	driver.RawAppender
	suite.CorruptReporter
}
