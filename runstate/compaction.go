package runstate

import (
	"bytes"
	"context"
	"errors"
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
	if !compacts(s, responseID) {
		return Compaction{}, nil
	}
	ca := s.(session.CompactionAware)
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

// compacts reports whether compact asks anything of s for a save with
// responseID: s is compaction-aware and the save has a response id.
func compacts(s session.Session, responseID string) bool {
	_, ok := s.(session.CompactionAware)
	return ok && responseID != ""
}

// ErrCompaction wraps the error of a compaction a Run ran after saving a
// turn. The turn is saved: do not save it again (a Turn repeated with the
// same response id writes nothing). The session decides when to compact
// again (openaigo's compaction session forces it at the next turn).
var ErrCompaction = errors.New("runstate: the turn is saved; its compaction failed")

// compactAfter is the Run's compaction bookkeeping after a saved turn with
// a response id, on a compaction-aware session (semantics §2.5), once the
// checkpoint is stored with nothing pending: it never runs inside a save,
// where it would rewrite the tail a pending write's recovery reads. It
// defers the compaction (forced at the next turn) when the turn carries
// local tool outputs or while anything of the run stands open (a held
// batch, an awaited or claimed call, an open turn): compacting then would
// separate a call from its output. It runs it otherwise.
func (r *Run) compactAfter(ctx context.Context, responseID string, local bool) error {
	r.compaction = Compaction{}
	if responseID == "" {
		return nil
	}
	open := r.cp.Pending != nil || r.cp.HasHeld() || len(r.cp.Claims()) > 0 ||
		r.cp.run.TurnOpen || r.cp.Step.Kind == StepInterruption
	store, known := r.stores[responseID]
	var sp *bool
	if known {
		sp = &store
	}
	c, err := compact(ctx, r.s, responseID, sp, local || open)
	r.compaction = c
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCompaction, err)
	}
	return nil
}

// ResponseStored records whether the response responseID was stored by
// the API (its "store"), for the compaction that follows its turn: a
// compaction-aware session then compacts an unstored response from its
// input rather than by previous_response_id.
func (r *Run) ResponseStored(responseID string, stored bool) {
	if r.stores == nil || len(r.stores) > 64 {
		r.stores = map[string]bool{}
	}
	r.stores[responseID] = stored
}

// Compaction returns what the compaction bookkeeping after the last saved
// turn did (CompactionNone when the session is not compaction-aware or the
// turn had no response id).
func (r *Run) Compaction() Compaction { return r.compaction }

// savedTurn reports whether responseID's turn is the last one the Run
// saved, with nothing recorded since.
func (r *Run) savedTurn(responseID string) bool {
	if responseID == "" || responseID != r.cp.run.ResponseID || r.cp.run.TurnOpen ||
		r.cp.Step.Kind != StepRunAgain || r.cp.Pending != nil || r.cp.HasHeld() {
		return false
	}
	doc, err := r.cp.MarshalJSON()
	return err == nil && bytes.Equal(doc, r.stored)
}
