package runstate

import (
	"context"
	"slices"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// ToolUseBehavior is what an agent does after its tools ran (Python's
// Agent.tool_use_behavior): the values are Python's.
type ToolUseBehavior string

// The tool-use behaviours. A behaviour other than ToolUseRunLLMAgain ends
// the turn on the tool's result; Python's function-valued behaviour is
// ToolUseCustom here.
const (
	ToolUseRunLLMAgain     ToolUseBehavior = "run_llm_again"      // the default: tool results go back to the model
	ToolUseStopOnFirstTool ToolUseBehavior = "stop_on_first_tool" // the first tool's output is the final output
	ToolUseStopAtTools     ToolUseBehavior = "stop_at_tools"      // Python's StopAtTools
	ToolUseCustom          ToolUseBehavior = "custom"             // a function decides
)

// ShouldDefer is Python's _should_defer_interrupted_session_items: an
// interrupted turn's items are withheld when output guardrails are
// configured and the tool-use behaviour is not ToolUseRunLLMAgain. The
// zero behaviour is Python's default, ToolUseRunLLMAgain.
func ShouldDefer(hasOutputGuardrails bool, behavior ToolUseBehavior) bool {
	return hasOutputGuardrails && behavior != ToolUseRunLLMAgain && behavior != ""
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
// ordinary record is ErrSlotOccupied, and a standing held record of another
// session ErrWrongSession. The step must be an interruption or run-again
// (ErrNoStep otherwise): a held record under any other step is one Load
// refuses. Items must not include the run's input. Nothing is registered
// when the result is empty or no session id is known.
func (cp *Checkpoint) Park(s session.Session, items []session.Item, opts ParkOptions) error {
	if !cp.Step.Kind.resumable() {
		return ErrNoStep
	}
	_, err := cp.park(s, items, opts.Policy, opts.ResponseID, opts.Store)
	return err
}

// unclaim puts a held batch claimed by TakeHeld back in the slot.
func (cp *Checkpoint) unclaim() {
	if cp.claimed != nil && cp.Pending == nil {
		cp.Pending = cp.claimed
	}
	cp.claimed = nil
}

// park returns the newly converted items.
func (cp *Checkpoint) park(s session.Session, items []session.Item, policy *Policy, responseID *string, store *bool) ([]session.Item, error) {
	cp.unclaim()
	w := cp.Pending
	if w != nil && !w.Held {
		return nil, ErrSlotOccupied
	}
	if w != nil && s != nil && s.SessionID() != w.SessionID {
		return nil, ErrWrongSession
	}
	if w != nil && w.policy.Present {
		policy = w.policy.Ptr()
	}
	conversation := isConversation(s)
	if conversation {
		policy = nil
	}
	converted := convert(items, policy)
	var base []session.Item
	if w != nil {
		base = w.Items
	}
	all := append(slices.Clone(base), converted...)
	merged, _ := dedupe(all, factsFor(nil, all))
	if conversation {
		merged = slices.DeleteFunc(mapItems(merged, sanitize), unpersistable)
	}
	if len(merged) == 0 {
		return nil, nil
	}
	var sid string
	switch {
	case s != nil:
		sid = s.SessionID()
	case w != nil:
		sid = w.SessionID
	default:
		return nil, nil
	}
	rec := &PendingWrite{
		SessionID:      sid,
		Items:          slices.Clone(merged),
		PersistedCount: cp.PersistedCount + len(converted),
		Held:           true,
		responseID:     optFromPtr(responseID),
		store:          optFromPtr(store),
		policy:         optFromPtr(policy),
		variant:        variantHeld,
	}
	if w != nil {
		if id, ok := w.responseID.Get(); ok && id != "" {
			rec.responseID = w.responseID.clone()
		}
		if w.store.Present {
			rec.store = w.store.clone()
		}
		if w.policy.Present {
			rec.policy = w.policy.clone()
		}
		rec.extra = w.clone().extra
		rec.label = w.label
	}
	cp.Pending = rec
	return converted, nil
}

// ExtendHeld folds a detached resume's resolved items into the standing
// held batch, converting them under the record's own policy (Python's
// extend_held_session_write); the output committer calls it as each tool
// output commits. It is a no-op when no held record stands.
//
// The outputs folded are remembered for this turn (until StartTurn or the
// next Resume): they are the outputs a handoff filter at this turn's exit
// has authority over. The exit applies the filter's view with
// SaveResumedTurn (a session attached) or HoldResumedTurn (detached).
func (cp *Checkpoint) ExtendHeld(items []session.Item) error {
	if !cp.HasHeld() {
		return nil
	}
	converted, err := cp.park(nil, items, nil, nil, nil)
	if err != nil {
		return err
	}
	for _, it := range converted {
		if k, ok := history.AnsweredKey(it); ok {
			if cp.folded == nil {
				cp.folded = map[history.PairKey]bool{}
			}
			cp.folded[k] = true
		}
	}
	return nil
}

// HoldResumedTurn is a detached resume's exit, SaveResumedTurn's
// counterpart when no session is attached: it folds the resolved turn's
// items (as the handoff filter left them) into the standing held batch,
// like ExtendHeld, and then applies the filter's view as SaveResumedTurn
// does attached: when items is not empty, each output folded this turn
// that items no longer carries is withdrawn from the batch. Its call stays
// in the held record, as the Python SDK's record keeps it, and the
// reattach's entry settle drops it with the reasoning just before it (the
// pairing contract every settle applies), so the Session never gets what
// the filter dropped. An emptied turn withdraws nothing, and history
// carried from an earlier run is never withdrawn. A batch left empty
// clears the slot. It is a no-op when no held record stands.
func (cp *Checkpoint) HoldResumedTurn(items []session.Item) error {
	if err := cp.ExtendHeld(items); err != nil || !cp.HasHeld() {
		return err
	}
	w := cp.Pending
	kept := withdraw(w.Items, cp.filtered(items, w.policy.Ptr()))
	switch {
	case len(kept) == 0:
		cp.Pending = nil
	case len(kept) < len(w.Items):
		w.Items = kept
	}
	return nil
}

// filtered returns the keys of the outputs folded this turn that the
// resolved items (converted under policy) no longer carry: the outputs a
// handoff filter removed. An empty resolved turn removes nothing.
func (cp *Checkpoint) filtered(resolved []session.Item, policy *Policy) map[history.PairKey]bool {
	if len(cp.folded) == 0 || len(resolved) == 0 {
		return nil
	}
	present := map[history.PairKey]bool{}
	for _, it := range convert(resolved, policy) {
		if k, ok := history.AnsweredKey(it); ok {
			present[k] = true
		}
	}
	gone := map[history.PairKey]bool{}
	for k := range cp.folded {
		if !present[k] {
			gone[k] = true
		}
	}
	return gone
}

// withdraw removes from held the outputs answering a call in gone. Their
// calls stay, as Python's record keeps them: every settle passes the batch
// through safeToSettle, whose orphan prune drops a call left without its
// output (and the reasoning just before it). It returns held itself when
// nothing goes.
func withdraw(held []session.Item, gone map[history.PairKey]bool) []session.Item {
	if len(gone) == 0 {
		return held
	}
	var kept []session.Item
	for _, it := range held {
		if k, ok := history.AnsweredKey(it); ok && gone[k] {
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) == len(held) {
		return held
	}
	return kept
}

// TakeHeld claims the held batch and returns it (nil when no held record
// stands): the slot is free for the exit's save, and the caller hands the
// items to SaveResumedTurn in the same exit. Until a save settles it, the
// claimed batch stays on the checkpoint: MarshalJSON writes it as the held
// record, a save that fails before its append (or gets no session) puts it
// back, and only DiscardHeld drops it.
func (cp *Checkpoint) TakeHeld() []session.Item {
	if !cp.HasHeld() {
		return nil
	}
	cp.claimed, cp.Pending = cp.Pending, nil
	return cp.claimed.Items
}

// HasHeld reports whether a held record stands.
func (cp *Checkpoint) HasHeld() bool { return cp.Pending != nil && cp.Pending.Held }

// DiscardHeld drops a standing held record and reports whether there was
// one (Python clears the slot and records nothing else: a finished run's
// checkpoint carries no record). It is the output-guardrail tripwire's
// discard, made as soon as the blocked outcome is decided and before the
// sanitised rebuild is saved, so the raw batch can never reach the
// Session. The other two discards (a detached run's final output, a
// max-turns handler's output) wait until their exit succeeded: use
// DiscardHeldAfter.
func (cp *Checkpoint) DiscardHeld() bool {
	if cp.claimed != nil {
		cp.claimed = nil
		return true
	}
	if !cp.HasHeld() {
		return false
	}
	cp.Pending = nil
	return true
}

// DiscardHeldAfter runs exit and discards the held record only when it
// succeeded; on failure the record is kept and exit's error returned.
// exit is the guardrails and the final save of a run without a session
// that produced its final output, or the validation of a max-turns
// handler's output that ends the run (semantics §3.5.6).
func (cp *Checkpoint) DiscardHeldAfter(ctx context.Context, exit func(context.Context) error) error {
	if err := exit(ctx); err != nil {
		return err
	}
	cp.unclaim()
	if w := cp.Pending; w != nil && w.Held {
		cp.DiscardHeld()
		observe(ctx, Event{Kind: EventHeldDiscarded, SessionID: w.SessionID, Items: len(w.Items)})
	}
	return nil
}

// safeToSettle is the pairing guard (Python's _held_items_safe_to_settle):
// it returns the held items that may settle, in order. A held call settles
// only when an output of its mapped type is among held or resolved
// (resolved converted under policy), or its id is in pending; an MCP
// approval request only when a response names it or it is pending; a
// reasoning item goes with the dropped call it precedes.
func safeToSettle(held, resolved []session.Item, policy *Policy, pending []string) []session.Item {
	working := slices.Clone(held)
	for _, it := range held {
		k, ok := history.CallKey(it)
		if !ok || k.Type == history.TypeMCPApprovalRequest || !slices.Contains(pending, k.ID) {
			continue
		}
		out, _ := history.OutputTypeFor(k.Type)
		working = append(working, session.MustItem(string(encodeObject([]member{
			{Key: "type", Value: encodeString(out)},
			{Key: "call_id", Value: encodeString(k.ID)},
		}))))
	}
	working = append(working, convert(resolved, policy)...)
	keep := history.PruneOrphans(working, history.PruneOptions{})
	answered := map[string]bool{}
	for _, id := range pending {
		answered[id] = true
	}
	for _, it := range working {
		if it.Type() == history.TypeMCPApprovalResponse {
			if id, ok := it.StringField("approval_request_id"); ok {
				answered[id] = true
			}
		}
	}
	var kept []session.Item
	for i, it := range held {
		if it.Type() == history.TypeMCPApprovalRequest {
			if k, ok := history.CallKey(it); ok && !answered[k.ID] {
				continue
			}
			kept = append(kept, it)
		} else if keep[i] {
			kept = append(kept, it)
		}
	}
	return kept
}

// coversHeld reports whether the final items already carry every held
// request (as after a guardrail rebuild), so the held batch is redundant
// (Python's final_items_cover_held_batch). Like Python's, a batch without
// any request is covered.
func coversHeld(final, held []session.Item, policy *Policy) bool {
	ids := map[string]bool{}
	for _, it := range convert(final, policy) {
		if k, ok := history.CallKey(it); ok {
			ids[k.ID] = true
		}
	}
	for _, it := range held {
		if k, ok := history.CallKey(it); ok && !ids[k.ID] {
			return false
		}
	}
	return true
}
