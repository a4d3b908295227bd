package runstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// DefaultName is the checkpoint name a Run uses when Options.Name is empty.
const DefaultName = "run"

// Errors of a Run.
var (
	// ErrNoStore: the session keeps no checkpoints (it is not a
	// session.CheckpointStore) and Options.Store is nil.
	ErrNoStore = errors.New("runstate: the session keeps no checkpoints and Options.Store is nil")
	// ErrNotAwaiting: Output was given an output for a call that does not
	// await approval (never did, or is answered already).
	ErrNotAwaiting = errors.New("runstate: the call does not await approval")
	// ErrAwaiting: Settle or Finish while calls still await approval.
	ErrAwaiting = errors.New("runstate: calls still await approval")
)

// Store keeps checkpoint documents by name, each save naming the version
// it loaded (session.CheckpointStore's methods; see there for the
// contract). A Run uses the session itself when it is a
// session.CheckpointStore, and Options.Store otherwise.
type Store interface {
	LoadCheckpoint(ctx context.Context, name string) (doc []byte, version int64, err error)
	SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error)
	DeleteCheckpoint(ctx context.Context, name string, version int64) error
}

// Options configure a Run.
type Options struct {
	// Name is the checkpoint's name in its store; DefaultName when empty.
	// One conversation has one run in progress per name.
	Name string
	// Store keeps the checkpoint when the session is not a
	// session.CheckpointStore; ignored when it is.
	Store Store
	// OutputGuardrails says the agent has output guardrails: with a
	// ToolUse other than ToolUseRunLLMAgain, an interrupted turn is
	// withheld from the session until it settles (ShouldDefer).
	OutputGuardrails bool
	// ToolUse is the agent's tool-use behaviour; the zero value is
	// ToolUseRunLLMAgain.
	ToolUse ToolUseBehavior
	// Policy is the reasoning-item id policy items are saved under (nil:
	// keep ids).
	Policy *Policy
	// Owner names this process in the claims it records, for whoever
	// finds them in doubt; host:pid when empty.
	Owner string
}

// Run is one conversation's agent run, persisted as it goes: it owns the
// order of the calls the held write needs and keeps the checkpoint itself,
// saved under a version so that of two processes resuming one checkpoint
// only one can settle (the other gets session.ErrCheckpointConflict).
//
// A loop calls Open (which recovers first), then Input, then per model
// response Turn, Interrupt (the response awaits approval) or Finish; after
// an interruption a later Open, in any process, is followed by Output for
// each awaited call and Settle. Every call that appends is crash-safe: a
// process killed at any instant leaves a checkpoint from which the next
// Open lands each batch exactly once and never runs a completed tool's
// call again. Claim a call before running its tool and the tool runs at
// most once: a crash inside it leaves the call in doubt (InDoubt).
//
// Where the session commits an append and a checkpoint together
// (session.CheckpointCommitter: SQLite, PostgreSQL, Redis, memory), the
// two are one atomic step and no digests are read; elsewhere the
// checkpoint with its pending write is saved before each append and the
// session tail's digests decide at the next Open.
//
// A Run is not safe for concurrent use.
type Run struct {
	s       session.Session
	store   Store
	commit  session.CheckpointCommitter // nil: the digest protocol
	name    string
	opts    Options
	cp      *Checkpoint
	version int64             // of the stored checkpoint; 0: none stored
	stored  []byte            // the document last saved
	attempt []byte            // the document of the last atomic commit tried
	outputs []session.Item    // outputs Output folded into the held batch since Open
	wrapped session.Session   // r.s as session returns it, made once
	mine    map[string]string // calls this Run claimed: call id → the claim's token
	owner   string
	done    bool // Finish ended the run

	stores     map[string]bool // ResponseStored
	compaction Compaction      // the last turn's compaction bookkeeping
}

// Open loads the run's checkpoint from s's store (a new one when none is
// stored) and recovers before anything else: a pending batch an earlier
// process left is landed or its lost acknowledgement accepted, a held
// batch whose approvals all came back settles, and a checkpoint that must
// not resume fails (ErrTerminal, ErrCannotReconcile, the output-guardrail
// gate's errors). Call it before any model call or tool.
func Open(ctx context.Context, s session.Session, opts Options) (*Run, error) {
	if s == nil {
		return nil, errors.New("runstate: Open needs a session")
	}
	r := &Run{s: s, name: opts.Name, opts: opts, owner: opts.Owner}
	if r.name == "" {
		r.name = DefaultName
	}
	if r.owner == "" {
		r.owner = defaultOwner()
	}
	if cs, ok := s.(session.CheckpointStore); ok {
		r.store = cs
		r.commit, _ = s.(session.CheckpointCommitter)
	} else if opts.Store != nil {
		r.store = opts.Store
	} else {
		return nil, ErrNoStore
	}
	if err := r.reload(ctx); err != nil {
		return nil, err
	}
	if err := r.recover(ctx); err != nil {
		return nil, err
	}
	if r.cp.Step.Kind == StepInterruption {
		// The boundary is proven: a Run parks only at a response's end.
		if err := r.cp.CheckOutputGuardrailGate(Gate{
			OutputGuardrails: opts.OutputGuardrails,
			Deferral:         ShouldDefer(opts.OutputGuardrails, opts.ToolUse),
			BoundaryProven:   true,
			SessionAttached:  true,
		}); err != nil {
			return nil, err
		}
	}
	if err := r.sync(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// recover lands or settles what the loaded checkpoint left (Resume). When
// another process's save lands first (it settled the same batch, or moved
// the run on), the stored checkpoint is read again and recovered from: a
// conflict here is not the caller's, who has done nothing yet.
func (r *Run) recover(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		_, err := r.cp.Resume(ctx, r.session())
		if err == nil {
			return nil
		}
		if err = r.failed(ctx, err); err == nil || !errors.Is(err, session.ErrCheckpointConflict) || attempt == 3 {
			return err
		}
		if err := r.reload(ctx); err != nil {
			return err
		}
	}
}

// Awaiting returns the ids of the calls awaiting approval that no one
// claimed, oldest first; nil when the run is not interrupted. A claimed
// call is never offered here again: see Claim and InDoubt.
func (r *Run) Awaiting() []string {
	awaiting, _, _ := r.cp.split(r.mine)
	return awaiting
}

// InDoubt returns the ids of the calls claimed by another Run (another
// process, or one before a restart) whose outputs are not recorded: their
// tools may have run, may have died running, or may be running still in
// the process that claimed them (Checkpoint.Claims says who and when: a
// checkpoint cannot tell a dead claimer from a slow one). Each is resolved
// with Output (the result found, e.g. by asking the tool's system under
// the call id, which is the natural idempotency key), Reclaim (run it
// again, on purpose) or Abandon (tell the model its outcome is unknown).
// Resolve a call only once its claimer is known to be gone, or when its
// tool is idempotent under the call id: a live claimer's own Output then
// fails with session.ErrCheckpointConflict, so the history stays exactly
// once, but a Reclaim beside a live claimer runs the tool twice.
func (r *Run) InDoubt() []string {
	_, _, inDoubt := r.cp.split(r.mine)
	return inDoubt
}

// Claim records, in one versioned save of the stored checkpoint, that the
// tool of an awaited call is starting: call it after the approval and
// before the tool runs, and record the tool's Output when it returns. Of
// two processes that claim one call, exactly one succeeds; the other gets
// an error wrapping session.ErrCheckpointConflict and must not run the
// tool. After a crash inside the tool, the next Open reports the call in
// doubt (InDoubt, Next), never awaiting.
//
// What holds for a tool's side effects: a claimed tool runs at most once
// (in doubt after a crash inside it, until the caller resolves it); a tool
// run without a claim runs at least once (a crash before its Output is
// recorded offers the call again). The history is exactly once either way.
//
// A call this Run claimed already is no error. A call in doubt is an
// *InDoubtError (Reclaim it to run it again); a call that does not await
// approval is ErrNotAwaiting. If the save fails nothing is claimed; a save
// whose reply was lost leaves the call in doubt for the next Open, which
// is safe: the tool did not run.
func (r *Run) Claim(ctx context.Context, callID string) error {
	awaiting, running, inDoubt := r.cp.split(r.mine)
	switch {
	case slices.Contains(running, callID):
		return nil
	case slices.Contains(inDoubt, callID):
		return r.inDoubt(inDoubt)
	case !slices.Contains(awaiting, callID):
		return fmt.Errorf("%w: %s", ErrNotAwaiting, callID)
	}
	return r.claim(ctx, callID)
}

// Reclaim claims a call in doubt for this Run, to run its tool again on
// purpose: its claimer is gone and the tool's system said it did not act
// on the call id, or the tool is idempotent under it (see InDoubt). Like
// Claim, one of two reclaimers wins and the other gets
// session.ErrCheckpointConflict. A call not in doubt is ErrNotInDoubt.
func (r *Run) Reclaim(ctx context.Context, callID string) error {
	if _, _, inDoubt := r.cp.split(r.mine); !slices.Contains(inDoubt, callID) {
		return fmt.Errorf("%w: %s", ErrNotInDoubt, callID)
	}
	return r.claim(ctx, callID)
}

func (r *Run) claim(ctx context.Context, callID string) error {
	prev := r.cp.run.clone()
	r.cp.setClaim(callID, r.owner, time.Now())
	doc, err := r.cp.MarshalJSON()
	if err == nil && !brokenClaim {
		err = r.put(ctx, doc) // always a write: the version check is the claim
	}
	if err != nil {
		r.cp.run = prev
		return err
	}
	if r.mine == nil {
		r.mine = map[string]string{}
	}
	r.mine[callID] = r.cp.run.Claims[callID].Token
	return nil
}

// Abandon resolves a claimed call (in doubt, or this Run's own whose tool
// failed) by recording an output that tells the model message, e.g. that
// the outcome is unknown: a function_call_output or custom_tool_call_output
// whose output is message. For other call types, build the output and
// record it with Output.
func (r *Run) Abandon(ctx context.Context, callID, message string) error {
	if !r.cp.isClaimed(callID) {
		return fmt.Errorf("runstate: Abandon: %s is not claimed", callID)
	}
	call, err := r.findCall(ctx, callID)
	if err != nil {
		return err
	}
	typ, _ := history.OutputTypeFor(call.Type())
	if typ != "function_call_output" && typ != "custom_tool_call_output" {
		return fmt.Errorf("runstate: Abandon writes only function and custom tool outputs; record the %s of %s with Output", typ, callID)
	}
	out, err := session.NewItem(encodeObject([]member{
		{Key: "type", Value: encodeString(typ)},
		{Key: "call_id", Value: encodeString(callID)},
		{Key: "output", Value: encodeString(message)},
	}))
	if err != nil {
		return err
	}
	return r.Output(ctx, out)
}

// findCall returns the call item of id: from the withheld batch, or else
// the newest in the session.
func (r *Run) findCall(ctx context.Context, id string) (session.Item, error) {
	var pool []session.Item
	if w := r.cp.Pending; w != nil && w.Held {
		pool = w.Items
	}
	for _, it := range slices.Backward(pool) {
		if k, ok := history.CallKey(it); ok && k.ID == id {
			return it, nil
		}
	}
	found, _, err := findInSession(ctx, r.s, []string{id})
	if err != nil {
		return session.Item{}, err
	}
	if it, ok := found[id]; ok {
		return it, nil
	}
	return session.Item{}, &UnknownCallError{CallIDs: []string{id}}
}

// inDoubt returns the *InDoubtError naming ids.
func (r *Run) inDoubt(ids []string) error {
	e := &InDoubtError{CallIDs: ids}
	for _, c := range r.cp.Claims() {
		if slices.Contains(ids, c.CallID) {
			e.Claims = append(e.Claims, c)
		}
	}
	return e
}

// unanswered fails while a call awaits approval, runs or is in doubt.
func (r *Run) unanswered() error {
	awaiting, running, inDoubt := r.cp.split(r.mine)
	if len(inDoubt) > 0 {
		return r.inDoubt(inDoubt)
	}
	if ids := append(awaiting, running...); len(ids) > 0 {
		return fmt.Errorf("%w: %v", ErrAwaiting, ids)
	}
	return nil
}

// Input persists the run's input items (the user's message), before the
// first model call.
func (r *Run) Input(ctx context.Context, items ...session.Item) error {
	if err := r.unanswered(); err != nil {
		return err
	}
	if r.cp.Step.Kind == StepNone {
		r.cp.SetStep(StepRunAgain) // the next step is a model call
	}
	r.done = false
	return r.save(ctx, func(s session.Session) error {
		_, err := r.cp.Save(ctx, s, SaveArgs{Input: items, Register: true})
		return err
	})
}

// Turn persists a model response's turn that did not end in an approval
// (its messages, reasoning, tool calls and their outputs); the run goes on
// with another model call. responseID may be empty. It fails with
// ErrAwaiting (or an *InDoubtError) while an interrupted call is not
// answered, and with ErrUnsettled while a withheld batch waits for Settle.
//
// On a compaction-aware session (session.CompactionAware) the saved turn
// is then compacted as the Python runner does (see Compaction); a failed
// compaction is an error wrapping ErrCompaction, with the turn saved, and
// a Turn repeated with the same non-empty response id writes nothing.
func (r *Run) Turn(ctx context.Context, responseID string, items ...session.Item) error {
	if err := r.ready(); err != nil {
		return err
	}
	if r.savedTurn(responseID) {
		return nil // a retry after an error of its compaction
	}
	r.cp.StartTurn()
	r.cp.SetStep(StepRunAgain)
	r.cp.run.TurnOpen, r.cp.run.ResponseID, r.done = false, responseID, false
	err := r.save(ctx, func(s session.Session) error {
		_, err := r.cp.Save(ctx, s, SaveArgs{NewItems: items, Slice: true, Register: true, ResponseID: responseID, Policy: r.opts.Policy})
		return err
	})
	if err != nil {
		return err
	}
	local := compacts(r.s, responseID) && hasLocalOutputs(items) // only a compaction asks
	return r.compactAfter(ctx, responseID, local)
}

// ready fails unless a new turn may start.
func (r *Run) ready() error {
	if err := r.unanswered(); err != nil {
		return err
	}
	if r.cp.HasHeld() {
		return ErrUnsettled
	}
	return nil
}

// Interrupt persists a turn that ended with the calls awaiting approval:
// items are the turn's items (the calls among them). Under the
// output-guardrail gate (Options) they are withheld from the session and
// ride the checkpoint until Settle; otherwise they are saved now. Either
// way the checkpoint names the awaited calls, and the process may exit.
//
// Each awaited id must name a call among items, or an unanswered call in
// the session: otherwise the call is an *UnknownCallError (or an
// *AnsweredError for a call answered already) and nothing is written, so
// no output can ever be recorded without its call.
func (r *Run) Interrupt(ctx context.Context, responseID string, items []session.Item, awaiting ...string) error {
	if len(awaiting) == 0 {
		return errors.New("runstate: Interrupt needs the ids of the calls awaiting approval")
	}
	if err := r.ready(); err != nil {
		return err
	}
	awaiting = slices.Compact(slices.Clone(awaiting))
	if err := r.checkAwaited(ctx, items, awaiting); err != nil && !brokenInterrupt {
		return err
	}
	deferred := ShouldDefer(r.opts.OutputGuardrails, r.opts.ToolUse)
	var undo func()
	if deferred {
		undo = r.snapshot() // the park below writes only the checkpoint
	}
	r.cp.StartTurn()
	r.cp.Step = Step{Kind: StepInterruption, PendingCallIDs: awaiting}
	r.cp.run.TurnOpen, r.cp.run.ResponseID, r.done = true, responseID, false
	if deferred {
		var id *string
		if responseID != "" {
			id = &responseID
		}
		err := r.cp.Park(r.s, items, ParkOptions{Policy: r.opts.Policy, ResponseID: id})
		if err == nil {
			err = r.sync(ctx)
		}
		if err != nil {
			undo() // nothing was recorded
		}
		return err
	}
	err := r.save(ctx, func(s session.Session) error {
		_, err := r.cp.Save(ctx, s, SaveArgs{NewItems: items, Slice: true, Register: true, ResponseID: responseID, Policy: r.opts.Policy})
		return err
	})
	if err != nil {
		return err
	}
	return r.compactAfter(ctx, responseID, true)
}

// checkAwaited refuses awaited ids that name no call of the turn nor an
// unanswered call of the session.
func (r *Run) checkAwaited(ctx context.Context, items []session.Item, ids []string) error {
	calls, answered := map[string]bool{}, map[string]bool{}
	for _, it := range items {
		if k, ok := history.CallKey(it); ok {
			calls[k.ID] = true
		}
		if k, ok := history.AnsweredKey(it); ok {
			answered[k.ID] = true
		}
	}
	var look []string
	for _, id := range ids {
		if !calls[id] {
			look = append(look, id)
		}
	}
	if len(look) > 0 {
		found, outs, err := findInSession(ctx, r.s, look)
		if err != nil {
			return err
		}
		var unknown []string
		for _, id := range look {
			if _, ok := found[id]; !ok {
				unknown = append(unknown, id)
			}
		}
		if len(unknown) > 0 {
			return &UnknownCallError{CallIDs: unknown}
		}
		for id := range outs {
			answered[id] = true
		}
	}
	var done []string
	for _, id := range ids {
		if answered[id] {
			done = append(done, id)
		}
	}
	if len(done) > 0 {
		return &AnsweredError{SessionID: r.s.SessionID(), CallIDs: done}
	}
	return nil
}

// Output records the output of an awaited call: the tool's result once
// approved, claimed and run, the result found for a call in doubt, or the
// rejection the model is to see (which needs no claim). Withheld calls
// keep it on the checkpoint beside them; otherwise it is appended now. The
// call no longer awaits approval, so a restart never runs it again; when
// no call awaits any more, a restart settles the batch at Open.
//
// If another process answered the call first, or changed the checkpoint
// since this Run loaded it, the error wraps session.ErrCheckpointConflict.
func (r *Run) Output(ctx context.Context, output session.Item) error {
	k, ok := history.AnsweredKey(output)
	if !ok {
		return fmt.Errorf("runstate: %s is not a tool output", output.Type())
	}
	if !slices.Contains(r.cp.pendingIDs(), k.ID) {
		return fmt.Errorf("%w: %s", ErrNotAwaiting, k.ID)
	}
	if r.cp.HasHeld() {
		undo := r.snapshot()
		if err := r.cp.ExtendHeld([]session.Item{output}); err != nil {
			undo()
			return err
		}
		r.outputs = append(r.outputs, output)
		r.cp.Step.answer([]string{k.ID})
		if len(r.cp.Step.PendingCallIDs) == 0 {
			r.cp.SetStep(StepRunAgain)
		}
		if err := r.sync(ctx); err != nil {
			undo() // nothing was recorded: the output must not settle later
			return err
		}
		delete(r.mine, k.ID)
		return nil
	}
	err := r.save(ctx, func(s session.Session) error {
		_, err := r.cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: []session.Item{output}, Policy: r.opts.Policy})
		return err
	})
	if err == nil {
		delete(r.mine, k.ID)
	}
	return err
}

// Settle ends the resumed turn: the withheld calls and their outputs land
// in the session ahead of items (the rest of the resolved turn, if any) in
// one ordered append, and the run goes on with another model call. It
// fails with ErrAwaiting while a call still awaits its output, and with an
// *InDoubtError while a claimed call is in doubt. When no interrupted turn
// is open (another process settled it first), Settle without items does
// nothing, and Settle with items fails with ErrNothingToSettle, appending
// nothing: the rest of a turn is never appended twice.
func (r *Run) Settle(ctx context.Context, items ...session.Item) error {
	if err := r.unanswered(); err != nil {
		return err
	}
	if !r.cp.HasHeld() && !r.cp.run.TurnOpen && len(r.outputs) == 0 && !(brokenSettle && len(items) > 0) {
		if len(items) > 0 {
			return fmt.Errorf("%w: %d items not appended", ErrNothingToSettle, len(items))
		}
		return nil
	}
	open := r.cp.run.TurnOpen
	r.cp.run.TurnOpen = false
	r.cp.SetStep(StepRunAgain)
	var err error
	if !r.cp.HasHeld() && len(items) == 0 {
		err = r.sync(ctx)
	} else {
		err = r.save(ctx, func(s session.Session) error {
			_, err := r.cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: r.resolved(items), Held: r.cp.TakeHeld(), Policy: r.opts.Policy})
			return err
		})
	}
	switch {
	case err == nil:
		r.outputs = nil // settled; until then a retry hands them over again
	case r.cp.Pending == nil:
		r.cp.run.TurnOpen = open // nothing was written or recorded
	}
	return err
}

// resolved is the resumed turn's items as a settle hands them over: the
// outputs recorded since Open, then items. (The turn's outputs are what a
// handoff filter would keep; a Run has none, so none is ever withdrawn.)
func (r *Run) resolved(items []session.Item) []session.Item {
	return append(slices.Clone(r.outputs), items...)
}

// Finish persists the final turn's items (the final output) and ends the
// run: the stored checkpoint becomes an idle document (no step, nothing
// pending, nothing claimed; Next reports NextInput to whoever loads it).
// It is not deleted: a deleted checkpoint's versions start over, so a copy
// of this run still held by another process could match a later run's
// version and write into it; an idle one keeps counting, and that copy
// gets session.ErrCheckpointConflict. It fails with ErrAwaiting while a call
// still awaits its output (an *InDoubtError while one is in doubt). A
// withheld batch settles ahead of items, as Python's final sweep does:
// should the process die inside that append, the checkpoint is terminal
// (it fails closed rather than replay an approved call).
func (r *Run) Finish(ctx context.Context, responseID string, items ...session.Item) error {
	if err := r.unanswered(); err != nil {
		return err
	}
	var err error
	switch {
	case r.cp.HasHeld():
		r.cp.SetStep(StepFinalOutput)
		r.cp.run.TurnOpen = false
		err = r.save(ctx, func(s session.Session) error {
			_, err := r.cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: r.resolved(items), Held: r.cp.TakeHeld(), ResponseID: responseID, Policy: r.opts.Policy})
			return err
		})
		if err == nil {
			err = r.compactAfter(ctx, responseID, true) // the settling batch carries outputs
		}
	case len(items) > 0:
		err = r.Turn(ctx, responseID, items...)
	}
	if err != nil {
		return err
	}
	r.outputs = nil
	if r.version != 0 {
		// Idle, not deleted: a deleted checkpoint's versions start over,
		// and a copy of this run could then match the next run's version.
		if err := r.put(ctx, blankDoc()); err != nil {
			return err
		}
	}
	r.cp, r.mine, r.done = New(), nil, true
	r.cp.atomic = r.commit != nil
	return nil
}

// snapshot returns a function that puts the run's checkpoint and the
// outputs it recorded back as they are now, for a call that changes them
// before its save and must leave nothing behind when the save fails.
func (r *Run) snapshot() (undo func()) {
	cp, outputs := r.cp.Clone(), len(r.outputs)
	cp.atomic, cp.memo = r.cp.atomic, r.cp.memo
	return func() { r.cp, r.outputs = cp, r.outputs[:outputs] }
}

// Checkpoint returns the run's checkpoint, for reading (Pending, Step, the
// document's other members). Change it only through the Run.
func (r *Run) Checkpoint() *Checkpoint { return r.cp }

// save runs op, an append through the session the commit protocol wraps,
// then saves the checkpoint if it changed after the append. A failed
// append is recovered first by the next call that appends (or Open).
func (r *Run) save(ctx context.Context, op func(session.Session) error) error {
	r.attempt = nil
	if w := r.cp.Pending; w != nil && !w.Held {
		// An earlier call's batch is still pending: land it first.
		if _, err := r.cp.Resume(ctx, r.session()); err != nil {
			return r.failed(ctx, err)
		}
	}
	if err := op(r.session()); err != nil {
		return r.failed(ctx, err)
	}
	return r.sync(ctx)
}

// failed handles an error of a call that may have appended. With an
// atomic store the stored checkpoint is the truth, so it is read again:
// either the commit happened (its document is there) or nothing did.
func (r *Run) failed(ctx context.Context, err error) error {
	if errors.Is(err, ErrAlreadyAnswered) {
		if taken := r.tookOver(ctx, err); taken != nil {
			return taken
		}
	}
	if r.commit == nil || errors.Is(err, session.ErrCheckpointConflict) {
		return err
	}
	attempt := r.attempt
	if rerr := r.reload(ctx); rerr != nil {
		return errors.Join(err, rerr)
	}
	if attempt != nil && bytes.Equal(r.stored, attempt) {
		return nil // the commit landed; only its acknowledgement was lost
	}
	return err
}

// tookOver returns an error wrapping session.ErrCheckpointConflict when the
// stored checkpoint is no longer the one this Run loaded or saved: another
// process answered a call (cause) from its own copy first. It returns nil
// when the checkpoint is unchanged.
func (r *Run) tookOver(ctx context.Context, cause error) error {
	_, v, err := r.store.LoadCheckpoint(ctx, r.name)
	switch {
	case errors.Is(err, session.ErrNoCheckpoint):
		v = 0
	case err != nil:
		return nil
	}
	if v == r.version {
		return nil
	}
	return fmt.Errorf("runstate: checkpoint %q changed since it was loaded (%v): %w", r.name, cause, session.ErrCheckpointConflict)
}

// reload reads the stored checkpoint into the run.
func (r *Run) reload(ctx context.Context) error {
	doc, v, err := r.store.LoadCheckpoint(ctx, r.name)
	switch {
	case errors.Is(err, session.ErrNoCheckpoint):
		r.cp, r.version, r.stored = New(), 0, nil
	case err != nil:
		return fmt.Errorf("runstate: load checkpoint %q: %w", r.name, err)
	default:
		cp, err := Load(doc)
		if err != nil {
			return fmt.Errorf("runstate: checkpoint %q of session %q: %w", r.name, r.s.SessionID(), err)
		}
		r.cp, r.version, r.stored = cp, v, doc
	}
	r.cp.atomic = r.commit != nil
	r.outputs = nil // the stored batch holds what was recorded of them
	return nil
}

// sync saves the checkpoint when it differs from the stored document.
func (r *Run) sync(ctx context.Context) error {
	doc, shared, err := r.cp.marshal()
	if err != nil {
		return err
	}
	if bytes.Equal(doc, r.stored) {
		return nil
	}
	if r.version == 0 && bytes.Equal(doc, blankDoc()) {
		return nil // nothing happened yet: Open on a new run stores nothing
	}
	if shared {
		doc = bytes.Clone(doc)
	}
	return r.put(ctx, doc)
}

// blankDoc is the document of a run nothing happened to (New's).
var blankDoc = sync.OnceValue(func() []byte {
	doc, err := New().MarshalJSON()
	if err != nil {
		panic(err)
	}
	return doc
})

// put saves doc under the version the run holds. A save whose reply was
// lost is read back: when the stored document is doc, it landed.
func (r *Run) put(ctx context.Context, doc []byte) error {
	v, err := r.store.SaveCheckpoint(ctx, r.name, doc, r.version)
	if err != nil && !errors.Is(err, session.ErrCheckpointConflict) {
		if got, gv, lerr := r.store.LoadCheckpoint(ctx, r.name); lerr == nil && gv != r.version && bytes.Equal(got, doc) {
			v, err = gv, nil
		}
	}
	if err != nil {
		return fmt.Errorf("runstate: save checkpoint %q: %w", r.name, err)
	}
	r.version, r.stored = v, doc
	return nil
}

// session returns r.s wrapped so that each append commits with the
// checkpoint: atomically where the store can, otherwise after saving the
// checkpoint (its pending write and tail digests) just before.
func (r *Run) session() session.Session {
	if r.wrapped == nil {
		p := capwrap.Of(r.s)
		p.Compaction, p.Deferrer = nil, nil // the Run compacts after its saves (compactAfter)
		r.wrapped = capwrap.Compose(runSession{Session: r.s, r: r}, p)
	}
	return r.wrapped
}

type runSession struct {
	session.Session
	r *Run
}

func (rs runSession) AddItems(ctx context.Context, items []session.Item) error {
	r := rs.r
	if r.commit == nil {
		doc, err := r.cp.MarshalJSON()
		if err != nil {
			return err
		}
		if err := r.put(ctx, doc); err != nil {
			return err
		}
		return rs.Session.AddItems(ctx, items)
	}
	doc, err := r.cp.settledDoc()
	if err != nil {
		return err
	}
	r.attempt = doc
	v, err := r.commit.AppendWithCheckpoint(ctx, items, r.name, doc, r.version)
	if err != nil {
		return fmt.Errorf("runstate: commit checkpoint %q: %w", r.name, err)
	}
	r.version, r.stored, r.attempt = v, doc, nil
	return nil
}

// settledDoc returns the document as it stands once the append has
// landed: the ordinary record that is being appended settled. It encodes
// cp with the record taken off for the call, rather than a deep copy of
// cp (whose batch, every item's bytes, would be copied on every turn).
func (cp *Checkpoint) settledDoc() ([]byte, error) {
	w := cp.Pending
	if w == nil || w.Held {
		return cp.MarshalJSON()
	}
	count := cp.PersistedCount
	cp.Pending, cp.PersistedCount = nil, w.PersistedCount
	defer func() { cp.Pending, cp.PersistedCount = w, count }()
	return cp.MarshalJSON()
}

func (rs runSession) AcceptsRunContext() bool    { return capwrap.AcceptsRunContext(rs.Session) }
func (rs runSession) IgnoreIDsForMatching() bool { return isConversation(rs.Session) }

// findInSession returns the newest call item of each of ids the session
// holds, and which of them it answers (reading tails as readBack does).
func findInSession(ctx context.Context, s session.Session, ids []string) (map[string]session.Item, map[string]bool, error) {
	var calls map[string]session.Item
	var answered map[string]bool
	_, err := readBack(ctx, s, 64, func(tail []session.Item) bool {
		calls, answered = map[string]session.Item{}, map[string]bool{}
		for _, it := range tail {
			if k, ok := history.CallKey(it); ok && slices.Contains(ids, k.ID) {
				calls[k.ID] = it
			}
			if k, ok := history.AnsweredKey(it); ok && slices.Contains(ids, k.ID) {
				answered[k.ID] = true
			}
		}
		return len(calls) == len(ids)
	})
	if err != nil {
		return nil, nil, err
	}
	return calls, answered, nil
}

// Test hooks, off but in the property test's negative controls
// (runprop_test.go): each breaks the Run the way it was broken before
// issue 34.
var (
	// brokenInterrupt: Interrupt does not check its awaited ids, so an
	// output can be recorded for a call that is nowhere.
	brokenInterrupt bool
	// brokenClaim: Claim does not write its claim, so two copies of a Run
	// both claim one call.
	brokenClaim bool
	// brokenSettle: Settle with items appends them when no interrupted
	// turn is open, so the rest of a turn can land twice.
	brokenSettle bool
)
