package runstate

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// ShouldDefer is Python's _should_defer_interrupted_session_items: an
// interrupted turn's items are withheld when output guardrails are
// configured and the tool-use behaviour is not "run_llm_again".
func ShouldDefer(hasOutputGuardrails bool, toolUseBehavior string) bool {
	return hasOutputGuardrails && toolUseBehavior != "run_llm_again"
}

// ParkOptions are the arguments of Park.
type ParkOptions struct {
	// Policy converts the items (forced to nil for a Conversations-like
	// session) and is recorded on a new record.
	Policy *Policy
	// ResponseID is the response the withheld items belong to.
	ResponseID *string
	// Store is the store setting that response was produced under.
	Store *bool
}

// Park registers an interrupted turn's withheld items as the held pending
// write (Python's defer_interrupted_session_write). It touches only the
// checkpoint, never the Session: s (nil when detached) only provides the
// session id and whether it is Conversations-like. A standing held record
// is merged with the new items into one canonical batch, keeping its
// session id, response id, store and policy when present; a standing
// ordinary record is ErrSlotOccupied. Items must not include the run's
// input. Nothing is registered when the result is empty or no session id
// is known.
func (cp *Checkpoint) Park(s session.Session, items []session.Item, opts ParkOptions) error {
	panic("todo")
}

// ExtendHeld folds a detached resume's resolved items into the standing
// held batch, converting them under the record's own policy (Python's
// extend_held_session_write). It is a no-op when no held record stands.
// The folded call keys are remembered for this turn (see SaveResumedTurn).
func (cp *Checkpoint) ExtendHeld(items []session.Item) error {
	panic("todo")
}

// TakeHeld frees the slot and returns the held batch (nil when no held
// record stands). The caller hands the items to SaveResumedTurn in the same
// exit, or drops them deliberately.
func (cp *Checkpoint) TakeHeld() []session.Item { panic("todo") }

// HasHeld reports whether a held record stands.
func (cp *Checkpoint) HasHeld() bool { return cp.Pending != nil && cp.Pending.Held }

// DiscardReason says why a held batch is discarded (spec §3.5.6).
type DiscardReason string

// The discard reasons.
const (
	// DiscardTripwire: an output guardrail tripped; only the sanitised
	// rebuild may be persisted.
	DiscardTripwire DiscardReason = "tripwire"
	// DiscardDetachedCompletion: a run without a session produced its final
	// output.
	DiscardDetachedCompletion DiscardReason = "detached-completion"
	// DiscardMaxTurnsCompletion: a max-turns handler's output ended the run.
	DiscardMaxTurnsCompletion DiscardReason = "max-turns-completion"
)

// DiscardHeld drops a standing held record and reports whether there was
// one. Call it only once the exit succeeded; DiscardHeldAfter does that.
func (cp *Checkpoint) DiscardHeld(reason DiscardReason) bool { panic("todo") }

// DiscardHeldAfter runs exit (the guardrails and the final save, or the
// handler's validation) and discards the held record only when it
// succeeded; on failure the record is kept and exit's error returned.
func (cp *Checkpoint) DiscardHeldAfter(ctx context.Context, reason DiscardReason, exit func(context.Context) error) error {
	panic("todo")
}

// SafeToSettle is the pairing guard (Python's _held_items_safe_to_settle):
// it returns the held items that may settle, in order. A held call settles
// only when an output of its mapped type is among held or resolved
// (resolved converted under policy), or its id is in pending; an MCP
// approval request only when a response names it or it is pending; a
// reasoning item goes with the dropped call it precedes.
func SafeToSettle(held, resolved []session.Item, policy *Policy, pending []string) []session.Item {
	panic("todo")
}

// CoversHeld reports whether the final items already carry every held
// request (as after a guardrail rebuild), so the held batch is redundant
// (Python's final_items_cover_held_batch).
func CoversHeld(final, held []session.Item, policy *Policy) bool { panic("todo") }
