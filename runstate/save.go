package runstate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// SaveArgs are the arguments of one Save (Python's save_result_to_session).
type SaveArgs struct {
	// Input is the input slot: the caller's input items. It is saved ahead
	// of NewItems, as is, and never counts toward the result's Count or
	// the compaction deferral.
	Input []session.Item
	// NewItems are the turn's items, in input-item form, before conversion.
	NewItems []session.Item
	// Policy converts NewItems (forced to nil for a Conversations-like
	// session).
	Policy *Policy
	// ResponseID is the response the save belongs to; empty skips the
	// compaction bookkeeping.
	ResponseID string
	// Store is the store setting of that response.
	Store *bool
	// Slice skips the first cp.PersistedCount NewItems (re-adding tool
	// outputs among them) and advances cp.PersistedCount by the count
	// (Python passes run_state).
	Slice bool
	// Register registers the batch as the ordinary pending write and settles
	// it immediately, so a crash or failure mid-append leaves a record
	// Resume recovers (Python passes resumed_write_state).
	Register bool

	// settlingHeld says Input is a held batch settling here (set only by
	// SaveResumedTurn and Resume): its items count toward the reported
	// count and its outputs toward the compaction deferral.
	settlingHeld bool
}

// CompactionKind says what a save's compaction bookkeeping did.
type CompactionKind string

// The compaction outcomes.
const (
	CompactionNone     CompactionKind = ""         // no response id, or not compaction-aware
	CompactionDeferred CompactionKind = "deferred" // DeferCompaction called (or skipped when the session cannot defer)
	CompactionRan      CompactionKind = "ran"      // RunCompaction called
)

// Compaction is the compaction bookkeeping one save did (semantics §2.5).
type Compaction struct {
	Kind       CompactionKind
	ResponseID string
	Store      *bool
	Force      bool // RunCompaction was forced by a pending deferral
}

// SaveResult is what one save did.
type SaveResult struct {
	// Count is the number of items the append wrote out of NewItems, plus,
	// when a held batch settles through the save (SaveResumedTurn, Resume),
	// out of that batch (after dedup).
	Count int
	// Appended is the batch handed to the session (nil when nothing was
	// appended).
	Appended []session.Item
	// Compaction is the compaction bookkeeping done after the save.
	Compaction Compaction
	// Recovered says what Resume did with the pending write it found
	// (RecoveryNone for Save and SaveResumedTurn).
	Recovered Recovery
}

// Recovery is what Resume did with the checkpoint's pending write.
type Recovery string

// The recoveries Resume reports.
const (
	RecoveryNone     Recovery = ""             // no pending write stood
	RecoveryAppended Recovery = "appended"     // the pending batch had not landed: Resume appended it
	RecoveryAccepted Recovery = "acknowledged" // the batch had landed before the process died: its lost acknowledgement was accepted, nothing appended
	RecoveryHeld     Recovery = "held"         // a held batch rides the checkpoint (detached, or awaiting approval)
	RecoverySettled  Recovery = "settled"      // a held batch settled at entry (run-again): appended
)

// Save persists a turn to s (Python's save_result_to_session): it
// converts NewItems, deduplicates Input+NewItems preferring the latest,
// sanitises for a Conversations-like session, appends the batch (as a
// registered pending write with Register), advances cp.PersistedCount with
// Slice, and runs the compaction bookkeeping. With s nil it does nothing.
//
// With Register, a standing record is ErrSlotOccupied and nothing is
// written; a failed append leaves the record on cp for Resume. A session
// error is returned wrapped (errors.Is finds it). A compaction error is
// returned after the append succeeded, with the result filled in.
func (cp *Checkpoint) Save(ctx context.Context, s session.Session, args SaveArgs) (SaveResult, error) {
	if s == nil {
		return SaveResult{}, nil
	}
	if args.Register && cp.Step.Kind == StepNone {
		return SaveResult{}, ErrNoStep
	}
	if args.Register && cp.claimed != nil && !args.settlingHeld {
		return SaveResult{}, ErrSlotOccupied // the claimed batch settles first
	}
	already := 0
	if args.Slice {
		already = cp.PersistedCount
	}
	readded, newRun := sliceTurn(args.NewItems, already, args.Slice)
	conversation := isConversation(s)
	ignoreIDs := conversation
	converted := forSession(conversation, newRun, args.Policy)

	toSave := converted // convert's own slice
	if len(args.Input) > 0 {
		toSave = append(slices.Clone(args.Input), converted...)
	}
	var factsBuf [32]facts // a turn's, on the stack
	toSave, fs := dedupe(toSave, factsFor(factsBuf[:0], toSave))
	if conversation {
		toSave = mapItems(toSave, sanitize)
	}
	var readErr error // the answered check could not read the session
	kept, tail, err := dropAnswered(ctx, s, toSave, fs, readded)
	switch {
	case err == nil:
		toSave = kept
	case errors.As(err, new(*AnsweredError)) || !args.Register:
		return SaveResult{}, err
	default:
		readErr = err // registered below, so the failure leaves the batch recorded
	}
	lists := [][]session.Item{converted, heldIf(args)}
	if conversation {
		for i := range lists {
			lists[i] = mapItems(lists[i], sanitize)
		}
	}
	count, err := persistedCount(toSave, lists, ignoreIDs)
	if err != nil {
		return SaveResult{}, err
	}
	if conversation {
		toSave = slices.DeleteFunc(toSave, unpersistable)
	}
	if len(toSave) == 0 {
		if args.Slice {
			cp.PersistedCount = already + count
		}
		return SaveResult{Count: count}, nil
	}
	if args.Register {
		if cp.Pending != nil {
			return SaveResult{}, ErrSlotOccupied
		}
		cp.Pending = &PendingWrite{
			SessionID:      s.SessionID(),
			Items:          toSave, // Save's own slice, changed no more
			PersistedCount: cp.PersistedCount + count,
		}
		if args.settlingHeld {
			cp.claimed = nil // the record holds what settles of it
		}
		cp.Pending.prefetch(tail, ignoreIDs)
		if readErr != nil {
			return SaveResult{}, readErr
		}
		if _, err := cp.settleOrdinary(ctx, s); err != nil {
			return SaveResult{}, err
		}
	} else if err := session.Append(ctx, s, toSave); err != nil {
		return SaveResult{}, fmt.Errorf("runstate: save: %w", err)
	}
	if args.settlingHeld {
		cp.claimed = nil
	}
	if args.Slice {
		cp.PersistedCount = already + count
	}
	res := SaveResult{Count: count, Appended: toSave}
	local := compacts(s, args.ResponseID) && // only a compaction asks
		(hasLocalOutputs(args.NewItems) || (args.settlingHeld && hasLocalOutputs(args.Input)))
	res.Compaction, err = compact(ctx, s, args.ResponseID, args.Store, local)
	return res, err
}

// persistedCount returns how many items of lists the batch toSave
// carries, matching by digest as Python does (each item of toSave matches
// one item of lists at most). When every item of lists is itself in toSave
// (the same Item, which has the same digest), that is all of them, and no
// digest is needed: only a batch that dedup or sanitising changed is
// digested.
func persistedCount(toSave []session.Item, lists [][]session.Item, ignoreIDs bool) (int, error) {
	if n, ok := countSame(toSave, lists); ok {
		return n, nil
	}
	dg := newDigester(ignoreIDs)
	remaining, err := dg.counts(toSave)
	if err != nil {
		return 0, err
	}
	count := 0
	for _, list := range lists {
		ds, err := dg.digests(list)
		if err != nil {
			return 0, err
		}
		for _, d := range ds {
			if remaining[d] > 0 {
				remaining[d]--
				count++
			}
		}
	}
	return count, nil
}

// countSame matches each item of lists to an occurrence of the same Item
// in toSave, each occurrence once; ok is false when one has no match.
func countSame(toSave []session.Item, lists [][]session.Item) (n int, ok bool) {
	if inOrder(toSave, lists) {
		return len(toSave), true // each item matches its own occurrence
	}
	left := make(map[session.Item]int, len(toSave))
	for _, it := range toSave {
		left[it]++
	}
	for _, list := range lists {
		for _, it := range list {
			if left[it] == 0 {
				return 0, false
			}
			left[it]--
			n++
		}
	}
	return n, true
}

// inOrder reports whether the lists, one after the other, are toSave
// item for item (the same Items, in the same order).
func inOrder(toSave []session.Item, lists [][]session.Item) bool {
	i := 0
	for _, list := range lists {
		for _, it := range list {
			if i == len(toSave) || toSave[i] != it {
				return false
			}
			i++
		}
	}
	return i == len(toSave)
}

// sliceTurn drops the first n items already persisted this turn, re-adding
// the tool outputs among them that the slice would lose (a stale count must
// never lose an output). It returns the re-added outputs too.
func sliceTurn(items []session.Item, n int, slice bool) (readded, out []session.Item) {
	if !slice || n <= 0 {
		return nil, items
	}
	if n >= len(items) {
		return nil, nil
	}
	rest := items[n:]
	var missing []session.Item
	for _, it := range items[:n] {
		if isToolOutput(it) && !slices.ContainsFunc(rest, it.Equal) {
			missing = append(missing, it)
		}
	}
	return missing, append(slices.Clone(missing), rest...)
}

// heldIf returns the input slot when it is a settling held batch, whose
// items count toward the save's count.
func heldIf(args SaveArgs) []session.Item {
	if args.settlingHeld {
		return args.Input
	}
	return nil
}

// isToolOutput reports whether it is a tool output of the call/output table.
func isToolOutput(it session.Item) bool {
	_, ok := history.CallTypeFor(it.Type())
	return ok
}

// hasLocalOutputs reports whether items carry a locally produced tool
// output: a tool output of the table or an MCP approval response.
func hasLocalOutputs(items []session.Item) bool {
	return slices.ContainsFunc(items, history.IsOutput)
}

func mapItems(items []session.Item, f func(session.Item) session.Item) []session.Item {
	out := make([]session.Item, len(items))
	for i, it := range items {
		out[i] = f(it)
	}
	return out
}

// ResumedTurn are the arguments of SaveResumedTurn.
type ResumedTurn struct {
	// Items are the resolved turn's items, in input-item form.
	Items []session.Item
	// Held is a held batch claimed with TakeHeld, to land ahead of Items in
	// the same append.
	Held []session.Item
	// Policy, ResponseID and Store are the resume's (not the parked
	// response's): exits compact for the resume's response.
	Policy     *Policy
	ResponseID string
	Store      *bool
}

// SaveResumedTurn persists a resumed turn's items with the held batch
// ahead of them in one ordered append (Python's save_resumed_turn_items).
// Items is the resolved turn as the handoff filter left it; Held is the
// batch claimed with TakeHeld in the same exit.
//
// A held batch the items already cover is dropped as redundant. Otherwise,
// when Items is not empty, each held output folded this turn (ExtendHeld)
// that Items no longer carries is withdrawn and takes its call with it
// (the same rule HoldResumedTurn applies detached), and the pairing guard
// keeps only settle-safe held items (calls still pending approval on
// cp.Step settle unpaired). The save registers the ordinary pending write
// when the step is run-again or interruption or a held batch is settling.
//
// On success cp.PersistedCount becomes the previous count plus the count
// the append reports (settled held items included); the SaveResult says
// what was appended and the compaction done. With s nil, or nothing to
// save, it changes nothing: a detached exit calls HoldResumedTurn instead
// and leaves the batch on the checkpoint.
func (cp *Checkpoint) SaveResumedTurn(ctx context.Context, s session.Session, turn ResumedTurn) (SaveResult, error) {
	prev := cp.PersistedCount
	settlingHeld := len(turn.Held) > 0
	if cp.claimed != nil && !settlingHeld {
		// The claimed batch holds the calls this turn's outputs answer:
		// saving the outputs without it would put them before their calls.
		cp.unclaim()
		return SaveResult{}, ErrSlotOccupied
	}
	if s == nil {
		if settlingHeld {
			cp.unclaim()
			return SaveResult{}, ErrNoSession
		}
		return SaveResult{}, nil
	}
	if len(turn.Items) == 0 && !settlingHeld {
		return SaveResult{}, nil
	}
	held := turn.Held
	if settlingHeld && coversHeld(turn.Items, held, turn.Policy) {
		held = nil
	}
	if len(held) > 0 {
		// A filter that kept part of the turn has authority over the
		// outputs folded this turn; an emptied turn does not withdraw the
		// executed pairs (semantics §5.1.7).
		held = withdraw(held, cp.filtered(turn.Items, turn.Policy))
		held = safeToSettle(held, turn.Items, turn.Policy, cp.pendingIDs())
	}
	register := cp.Step.Kind.resumable() || settlingHeld
	step := cp.Step.clone()
	cp.Step.answer(answeredIDs(held, turn.Items))
	if cp.Step.Kind == StepInterruption && len(step.PendingCallIDs) > 0 && len(cp.Step.PendingCallIDs) == 0 {
		cp.SetStep(StepRunAgain) // every awaited call is answered
	}
	res, err := cp.Save(ctx, s, SaveArgs{
		Input:        held,
		NewItems:     turn.Items,
		Policy:       turn.Policy,
		ResponseID:   turn.ResponseID,
		Store:        turn.Store,
		Register:     register,
		settlingHeld: settlingHeld,
	})
	if err != nil && res.Appended == nil {
		if cp.Pending == nil {
			cp.Step = step // nothing was written or recorded
		}
		cp.unclaim()
		return res, err
	}
	cp.PersistedCount = prev + res.Count
	if settlingHeld {
		observe(ctx, Event{Kind: EventHeldSettled, SessionID: s.SessionID(), Items: len(turn.Held)})
	}
	return res, err
}

// answeredIDs returns the ids of the calls the outputs among lists answer.
func answeredIDs(lists ...[]session.Item) []string {
	var ids []string
	for _, list := range lists {
		for _, it := range list {
			if k, ok := history.AnsweredKey(it); ok {
				ids = append(ids, k.ID)
			}
		}
	}
	return ids
}

// dropAnswered checks the batch's outputs whose calls are not in the
// batch against the session: an output for a call the session already
// answers is dropped when the slice re-added it (it was persisted before),
// and refused with an *AnsweredError otherwise. Only the tail back to the
// newest of those calls is read, and nothing when every output's call is
// in the batch (a fresh turn). fs are the batch's facts (sanitising keeps
// the members they record). It returns the tail it read (nil when it read
// none), which a registered save reuses for its digests.
func dropAnswered(ctx context.Context, s session.Session, batch []session.Item, fs []facts, readded []session.Item) ([]session.Item, *sessionTail, error) {
	// A turn holds a few calls and outputs: slices on the stack. An output
	// most often answers a call just before it: its calls are searched back
	// from there.
	var callsBuf [16]history.PairKey
	var outputsBuf [16]pairOutput
	calls, outputs := pairsOf(batch, fs, callsBuf[:0], outputsBuf[:0])
	missing := outputs[:0] // the outputs whose calls are not in the batch
	for _, o := range outputs {
		if !hasCall(calls, o.key, o.calls) {
			missing = append(missing, o)
		}
	}
	if len(missing) == 0 {
		return batch, nil, nil
	}
	need := make(map[history.PairKey]bool, len(missing))
	for _, o := range missing {
		need[o.key] = true
	}
	answered, tail, err := answeredInSession(ctx, s, need, len(batch)+1)
	if err != nil || len(answered) == 0 {
		return batch, tail, err
	}
	var refused []string
	kept := slices.DeleteFunc(slices.Clone(batch), func(it session.Item) bool {
		k, ok := history.AnsweredKey(it)
		if !ok || slices.Contains(calls, k) || !answered[k] {
			return false
		}
		if slices.ContainsFunc(readded, it.Equal) {
			return true
		}
		if !slices.Contains(refused, k.ID) {
			refused = append(refused, k.ID)
		}
		return false
	})
	if len(refused) > 0 {
		return nil, nil, &AnsweredError{SessionID: s.SessionID(), CallIDs: refused}
	}
	return kept, tail, nil
}

// pairOutput is an output's answered key and how many calls come before
// it in its batch.
type pairOutput struct {
	key   history.PairKey
	calls int
}

// pairsOf appends to calls the call keys of batch (history.CallKey) and to
// outputs its outputs' answered keys (history.AnsweredKey), from the
// items' facts fs where they say them.
func pairsOf(batch []session.Item, fs []facts, calls []history.PairKey, outputs []pairOutput) ([]history.PairKey, []pairOutput) {
	for i, it := range batch {
		f := &fs[i]
		if f.typ == history.TypeMCPApprovalRequest || f.typ == history.TypeMCPApprovalResponse || f.output && f.callID == "" {
			if k, ok := callKeyOf(it, f); ok {
				calls = append(calls, k)
			}
			if k, ok := answeredKeyOf(it, f); ok {
				outputs = append(outputs, pairOutput{k, len(calls)})
			}
			continue
		}
		// Here callKeyOf and answeredKeyOf read nothing but the facts.
		if f.call && f.callID != "" {
			calls = append(calls, history.PairKey{Type: f.typ, ID: f.callID})
		}
		if f.output {
			outputs = append(outputs, pairOutput{history.PairKey{Type: f.answers, ID: f.callID}, len(calls)})
		}
	}
	return calls, outputs
}

// hasCall reports whether calls holds k, searching back from
// calls[before-1] first.
func hasCall(calls []history.PairKey, k history.PairKey, before int) bool {
	for i := before - 1; i >= 0; i-- {
		if calls[i] == k {
			return true
		}
	}
	return slices.Contains(calls[before:], k)
}

// callKeyOf is history.CallKey(it), taken from its facts f where they
// say it.
func callKeyOf(it session.Item, f *facts) (history.PairKey, bool) {
	switch {
	case f.call:
		return history.PairKey{Type: f.typ, ID: f.callID}, f.callID != ""
	case f.typ == history.TypeMCPApprovalRequest:
		return history.CallKey(it)
	}
	return history.PairKey{}, false
}

// answeredKeyOf is history.AnsweredKey(it), taken from its facts f where
// they say it.
func answeredKeyOf(it session.Item, f *facts) (history.PairKey, bool) {
	if f.output && f.callID != "" {
		return history.PairKey{Type: f.answers, ID: f.callID}, true
	}
	if f.output || f.typ == history.TypeMCPApprovalResponse {
		return history.AnsweredKey(it) // the rules for an output without call_id
	}
	return history.PairKey{}, false
}

// sessionTail is the newest items of a session as one read saw them;
// whole says the read returned the whole history.
type sessionTail struct {
	items []session.Item
	whole bool
}

// answeredInSession returns which of the keys the session already holds an
// output for, reading tails as readBack does (the first of at least min
// items), and the first tail it read.
func answeredInSession(ctx context.Context, s session.Session, keys map[history.PairKey]bool, min int) (map[history.PairKey]bool, *sessionTail, error) {
	var answered map[history.PairKey]bool
	first, err := readBack(ctx, s, max(16, min), func(tail []session.Item) bool {
		answered = map[history.PairKey]bool{}
		found := map[history.PairKey]bool{}
		for _, it := range tail {
			if k, ok := history.AnsweredKey(it); ok && keys[k] {
				answered[k] = true
			}
			if k, ok := history.CallKey(it); ok && keys[k] {
				found[k] = true
			}
		}
		return len(found) == len(keys)
	})
	return answered, first, err
}

// readBack reads ever longer tails of s, the first of n items, handing
// each to enough, until enough reports that the tail holds what it looks
// for (a call's outputs can only follow it, so a tail holding the calls
// holds their outputs) or the history is read whole. It returns the first
// tail read.
func readBack(ctx context.Context, s session.Session, n int, enough func(tail []session.Item) bool) (*sessionTail, error) {
	var first *sessionTail
	for ; ; n *= 4 {
		tail, err := session.Latest(ctx, s, n)
		if err != nil {
			return first, fmt.Errorf("runstate: read session tail: %w", err)
		}
		if first == nil {
			first = &sessionTail{items: tail, whole: len(tail) < n}
		}
		if enough(tail) || len(tail) < n {
			return first, nil
		}
	}
}

// pendingIDs returns the ids still awaiting approval on the current step.
func (cp *Checkpoint) pendingIDs() []string {
	if cp.Step.Kind != StepInterruption {
		return nil
	}
	return cp.Step.PendingCallIDs
}
