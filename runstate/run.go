package runstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

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
// call again.
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
	version int64           // of the stored checkpoint; 0: none stored
	stored  []byte          // the document last saved
	attempt []byte          // the document of the last atomic commit tried
	outputs []session.Item  // outputs Output folded into the held batch since Open
	wrapped session.Session // r.s as session returns it, made once
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
	r := &Run{s: s, name: opts.Name, opts: opts}
	if r.name == "" {
		r.name = DefaultName
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
	if _, err := r.cp.Resume(ctx, r.session()); err != nil {
		return nil, r.failed(ctx, err)
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

// Awaiting returns the ids of the calls awaiting approval, oldest first;
// nil when the run is not interrupted.
func (r *Run) Awaiting() []string {
	if r.cp.Step.Kind != StepInterruption {
		return nil
	}
	return slices.Clone(r.cp.Step.PendingCallIDs)
}

// Input persists the run's input items (the user's message), before the
// first model call.
func (r *Run) Input(ctx context.Context, items ...session.Item) error {
	if r.cp.Step.Kind == StepNone {
		r.cp.SetStep(StepRunAgain) // the next step is a model call
	}
	return r.save(ctx, func(s session.Session) error {
		_, err := r.cp.Save(ctx, s, SaveArgs{Input: items, Register: true})
		return err
	})
}

// Turn persists a model response's turn that did not end in an approval
// (its messages, reasoning, tool calls and their outputs); the run goes on
// with another model call. responseID may be empty.
func (r *Run) Turn(ctx context.Context, responseID string, items ...session.Item) error {
	r.cp.StartTurn()
	r.cp.SetStep(StepRunAgain)
	return r.save(ctx, func(s session.Session) error {
		_, err := r.cp.Save(ctx, s, SaveArgs{NewItems: items, Slice: true, Register: true, ResponseID: responseID, Policy: r.opts.Policy})
		return err
	})
}

// Interrupt persists a turn that ended with the calls awaiting approval:
// items are the turn's items (the calls among them). Under the
// output-guardrail gate (Options) they are withheld from the session and
// ride the checkpoint until Settle; otherwise they are saved now. Either
// way the checkpoint names the awaited calls, and the process may exit.
func (r *Run) Interrupt(ctx context.Context, responseID string, items []session.Item, awaiting ...string) error {
	if len(awaiting) == 0 {
		return errors.New("runstate: Interrupt needs the ids of the calls awaiting approval")
	}
	r.cp.StartTurn()
	r.cp.Step = Step{Kind: StepInterruption, PendingCallIDs: slices.Clone(awaiting)}
	if ShouldDefer(r.opts.OutputGuardrails, r.opts.ToolUse) {
		var id *string
		if responseID != "" {
			id = &responseID
		}
		if err := r.cp.Park(r.s, items, ParkOptions{Policy: r.opts.Policy, ResponseID: id}); err != nil {
			return err
		}
		return r.sync(ctx)
	}
	return r.save(ctx, func(s session.Session) error {
		_, err := r.cp.Save(ctx, s, SaveArgs{NewItems: items, Slice: true, Register: true, ResponseID: responseID, Policy: r.opts.Policy})
		return err
	})
}

// Output records the output of an awaited call (the tool's result once
// approved and run, or the rejection the model is to see), as soon as it
// exists: withheld calls keep it on the checkpoint beside them, otherwise
// it is appended now. The call no longer awaits approval, so a restart
// never runs it again; when no call awaits any more, a restart settles the
// batch at Open.
func (r *Run) Output(ctx context.Context, output session.Item) error {
	k, ok := history.AnsweredKey(output)
	if !ok {
		return fmt.Errorf("runstate: %s is not a tool output", output.Type())
	}
	if !slices.Contains(r.Awaiting(), k.ID) {
		return fmt.Errorf("%w: %s", ErrNotAwaiting, k.ID)
	}
	if r.cp.HasHeld() {
		if err := r.cp.ExtendHeld([]session.Item{output}); err != nil {
			return err
		}
		r.outputs = append(r.outputs, output)
		r.cp.Step.answer([]string{k.ID})
		if len(r.cp.Step.PendingCallIDs) == 0 {
			r.cp.SetStep(StepRunAgain)
		}
		return r.sync(ctx)
	}
	return r.save(ctx, func(s session.Session) error {
		_, err := r.cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: []session.Item{output}, Policy: r.opts.Policy})
		return err
	})
}

// Settle ends the resumed turn: the withheld calls and their outputs land
// in the session ahead of items (the rest of the resolved turn, if any) in
// one ordered append, and the run goes on with another model call. It
// fails with ErrAwaiting while a call still awaits its output.
func (r *Run) Settle(ctx context.Context, items ...session.Item) error {
	if ids := r.Awaiting(); len(ids) > 0 {
		return fmt.Errorf("%w: %v", ErrAwaiting, ids)
	}
	r.cp.SetStep(StepRunAgain)
	if !r.cp.HasHeld() && len(items) == 0 {
		return r.sync(ctx)
	}
	err := r.save(ctx, func(s session.Session) error {
		_, err := r.cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: r.resolved(items), Held: r.cp.TakeHeld(), Policy: r.opts.Policy})
		return err
	})
	if err == nil {
		r.outputs = nil // settled; until then a retry hands them over again
	}
	return err
}

// resolved is the resumed turn's items as a settle hands them over: the
// outputs recorded since Open, then items. (The turn's outputs are what a
// handoff filter would keep; a Run has none, so none is ever withdrawn.)
func (r *Run) resolved(items []session.Item) []session.Item {
	return append(slices.Clone(r.outputs), items...)
}

// Finish persists the final turn's items (the final output) and deletes
// the checkpoint: the run is over. It fails with ErrAwaiting while a call
// still awaits its output. A withheld batch settles ahead of items, as
// Python's final sweep does: should the process die inside that append,
// the checkpoint is terminal (it fails closed rather than replay an
// approved call).
func (r *Run) Finish(ctx context.Context, responseID string, items ...session.Item) error {
	if ids := r.Awaiting(); len(ids) > 0 {
		return fmt.Errorf("%w: %v", ErrAwaiting, ids)
	}
	var err error
	switch {
	case r.cp.HasHeld():
		r.cp.SetStep(StepFinalOutput)
		err = r.save(ctx, func(s session.Session) error {
			_, err := r.cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: r.resolved(items), Held: r.cp.TakeHeld(), ResponseID: responseID, Policy: r.opts.Policy})
			return err
		})
	case len(items) > 0:
		err = r.Turn(ctx, responseID, items...)
	}
	if err != nil {
		return err
	}
	r.outputs = nil
	if r.version == 0 {
		return nil
	}
	if err := r.store.DeleteCheckpoint(ctx, r.name, r.version); err != nil {
		return fmt.Errorf("runstate: delete checkpoint %q: %w", r.name, err)
	}
	r.cp, r.version, r.stored = New(), 0, nil
	return nil
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
	return nil
}

// sync saves the checkpoint when it differs from the stored document.
func (r *Run) sync(ctx context.Context) error {
	doc, err := r.cp.MarshalJSON()
	if err != nil {
		return err
	}
	if bytes.Equal(doc, r.stored) {
		return nil
	}
	return r.put(ctx, doc)
}

func (r *Run) put(ctx context.Context, doc []byte) error {
	v, err := r.store.SaveCheckpoint(ctx, r.name, doc, r.version)
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
		r.wrapped = capwrap.Compose(runSession{Session: r.s, r: r}, capwrap.Of(r.s))
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
func (rs runSession) IgnoreIDsForMatching() bool { return capwrap.IgnoresIDs(rs.Session) }
