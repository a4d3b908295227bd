package runstate

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/session"
)

// compact is the runner's compaction bookkeeping after a save (semantics §2.5):
// on a compaction-aware session and with a response id, a save carrying a
// local tool output defers compaction for that response (compacting now
// would separate the output from its response chain); any other save runs
// it, forced when a deferral is pending.
//
// DeferCompaction receives the run context only when the session accepts it
// on its history calls (the gated wrapper); RunCompaction always receives
// the caller's context (the raw wrapper, for usage accounting).
func compact(ctx context.Context, s session.Session, responseID string, store *bool, localOutputs bool) (Compaction, error) {
	ca, ok := s.(session.CompactionAware)
	if responseID == "" || !ok {
		return Compaction{}, nil
	}
	c := Compaction{ResponseID: responseID, Store: store}
	if localOutputs {
		c.Kind = CompactionDeferred
		if d, ok := s.(session.CompactionDeferrer); ok {
			if err := d.DeferCompaction(session.ContextFor(ctx, s), responseID, store); err != nil {
				return c, fmt.Errorf("runstate: defer compaction: %w", err)
			}
		}
		return c, nil
	}
	c.Kind = CompactionRan
	if d, ok := s.(session.CompactionDeferrer); ok {
		_, c.Force = d.DeferredCompaction()
	}
	if err := ca.RunCompaction(ctx, session.CompactionArgs{ResponseID: responseID, Store: store, Force: c.Force}); err != nil {
		return c, fmt.Errorf("runstate: compaction: %w", err)
	}
	return c, nil
}
