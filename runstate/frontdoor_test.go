package runstate_test

import (
	"context"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cases the front-door issue saw on 02b4e50, each red there.

func TestWritesNeverProduceWhatReadsRefuse(t *testing.T) {
	t.Run("a registered save on a new checkpoint fails before writing", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := runstate.New()
		cp.StartTurn()
		saved := 0
		durable := cp.WrapSaveBeforeAppend(s, func([]byte) error { saved++; return nil })
		_, err := cp.Save(ctx, durable, runstate.SaveArgs{NewItems: items(user("hi")), Slice: true, Register: true})
		require.ErrorIs(t, err, runstate.ErrNoStep)
		assert.Zero(t, saved, "nothing reached the caller's storage")
		assert.Empty(t, s.appends, "nothing reached the session")
		assert.Nil(t, cp.Pending)
		roundTrips(t, cp)
	})
	t.Run("park needs an interruption or run-again step", func(t *testing.T) {
		cp := runstate.New()
		require.ErrorIs(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{}), runstate.ErrNoStep)
		assert.Nil(t, cp.Pending)
		roundTrips(t, cp)
	})
	t.Run("a failed registered save leaves a checkpoint Load accepts", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		s.fault = failBefore
		var doc []byte
		durable := cp.WrapSaveBeforeAppend(s, func(d []byte) error { doc = d; return nil })
		_, err := cp.Save(ctx, durable, runstate.SaveArgs{NewItems: items(assistant("x")), Slice: true, Register: true})
		require.ErrorIs(t, err, errBackend)
		back, err := runstate.Load(doc)
		require.NoError(t, err, "the document persisted before the append loads")
		require.NotNil(t, back.Pending)
		roundTrips(t, cp)
	})
	t.Run("fields no document can hold are refused by MarshalJSON", func(t *testing.T) {
		cp := runstate.New()
		cp.Schema = "banana"
		_, err := cp.MarshalJSON()
		assert.ErrorIs(t, err, runstate.ErrInvalidState)
		cp = runstate.New()
		cp.Step.Kind = "bogus"
		_, err = cp.MarshalJSON()
		assert.ErrorIs(t, err, runstate.ErrInvalidState)
		cp = fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{}))
		cp.Pending.Before = []string{"x"} // a held record never has digests
		_, err = cp.MarshalJSON()
		assert.ErrorIs(t, err, runstate.ErrInvalidState)
	})
}

func TestNoSecondOutputNoLostBatch(t *testing.T) {
	// The README's held-write snippet as it stood: no SetStep(RunAgain), no
	// ExtendHeld, the checkpoint kept only through WrapSaveBeforeAppend.
	// Restarting and running the approval path again must not append a
	// second output for c1.
	s := newFake(t, "s1")
	cp := fresh(runstate.StepInterruption)
	cp.Step.PendingCallIDs = []string{"c1"}
	require.NoError(t, cp.Park(s, items(call("c1")), runstate.ParkOptions{}))
	var stored []byte
	keep := func(d []byte) error { stored = d; return nil }
	approve := func(doc []byte) (*runstate.Checkpoint, error) {
		cp := must1(runstate.Load(doc))
		must1(cp.Resume(ctx, s))
		_, err := cp.SaveResumedTurn(ctx, cp.WrapSaveBeforeAppend(s, keep), runstate.ResumedTurn{Items: items(output("c1")), Held: cp.TakeHeld()})
		return cp, err
	}
	settled, err := approve(must1(cp.MarshalJSON()))
	require.NoError(t, err)
	assert.Equal(t, runstate.StepRunAgain, settled.Step.Kind, "a settled checkpoint no longer awaits c1")
	assert.Empty(t, settled.Step.PendingCallIDs)
	back := must1(runstate.Load(stored))
	assert.Equal(t, runstate.StepRunAgain, back.Step.Kind, "nor does the document stored inside the append")

	// A restart from that document, then the approval path again.
	cp = must1(runstate.Load(stored))
	must1(cp.Resume(ctx, s))
	cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c1"}} // as the old README left it
	_, err = cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: cp.TakeHeld()})
	var ae *runstate.AnsweredError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, runstate.ErrAlreadyAnswered)
	assert.Equal(t, []string{"c1"}, ae.CallIDs)
	got := must1(session.All(ctx, s))
	assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(strs(got)))
	assert.Empty(t, history.Diagnose(got), "no duplicate output")

	t.Run("a claimed batch without a session stays recorded", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s2"), items(call("c1")), runstate.ParkOptions{}))
		_, err := cp.SaveResumedTurn(ctx, nil, runstate.ResumedTurn{Held: cp.TakeHeld()})
		require.ErrorIs(t, err, runstate.ErrNoSession)
		require.True(t, cp.HasHeld(), "the held batch is back in the slot")
		assert.Equal(t, []string{"function_call:c1"}, types(strs(cp.Pending.Items)))
	})
	t.Run("a claimed batch is on the checkpoint until a save settles it", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s2"), items(call("c1")), runstate.ParkOptions{}))
		_ = cp.TakeHeld()
		back := must1(runstate.Load(must1(cp.MarshalJSON())))
		require.True(t, back.HasHeld())
	})
	t.Run("a claimed batch comes back when the append fails", func(t *testing.T) {
		s := newFake(t, "s3")
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(s, items(call("c1")), runstate.ParkOptions{}))
		cp.SetStep(runstate.StepRunAgain)
		s.fault = failBefore
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: cp.TakeHeld()})
		require.ErrorIs(t, err, errBackend)
		require.NotNil(t, cp.Pending, "the batch is recorded")
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(strs(cp.Pending.Items)))
	})
}

func TestStepKeepsItsAwaitedCalls(t *testing.T) {
	cp := runstate.New()
	cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c1", "c2"}}
	cp.SetStep(runstate.StepInterruption)
	assert.Equal(t, []string{"c1", "c2"}, cp.Step.PendingCallIDs)
	back := must1(runstate.Load(must1(cp.MarshalJSON())))
	assert.Equal(t, []string{"c1", "c2"}, back.Step.PendingCallIDs, "after a restart too")
}

func TestResumeSaysWhatItDid(t *testing.T) {
	s := newFake(t, "s1")
	cp := fresh(runstate.StepRunAgain)
	res := must1(cp.Resume(ctx, s))
	assert.Equal(t, runstate.RecoveryNone, res.Recovered)

	// A batch that never landed is appended; one that landed is accepted.
	for _, landed := range []bool{false, true} {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		if landed {
			s.fault = failAfter
		} else {
			s.fault = failBefore
		}
		_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(assistant("x")), Slice: true, Register: true})
		require.Error(t, err)
		s.fault = noFault
		res := must1(cp.Resume(ctx, s))
		want := runstate.RecoveryAppended
		if landed {
			want = runstate.RecoveryAccepted
		}
		assert.Equal(t, want, res.Recovered)
		assert.Len(t, must1(session.All(ctx, s)), 1)
	}
	t.Run("a held batch rides or settles", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(s, items(call("c1"), output("c1")), runstate.ParkOptions{}))
		assert.Equal(t, runstate.RecoveryHeld, must1(cp.Resume(ctx, s)).Recovered)
		cp.SetStep(runstate.StepRunAgain)
		assert.Equal(t, runstate.RecoverySettled, must1(cp.Resume(ctx, s)).Recovered)
	})
}

func TestShouldDeferIsTyped(t *testing.T) {
	assert.False(t, runstate.ShouldDefer(true, runstate.ToolUseRunLLMAgain))
	assert.False(t, runstate.ShouldDefer(true, ""), "the zero behaviour is Python's default")
	assert.True(t, runstate.ShouldDefer(true, runstate.ToolUseStopOnFirstTool))
	assert.True(t, runstate.ShouldDefer(true, runstate.ToolUseStopAtTools))
	assert.False(t, runstate.ShouldDefer(false, runstate.ToolUseStopOnFirstTool))
}

// roundTrips asserts that cp's document loads and is written back byte
// for byte.
func roundTrips(t *testing.T, cp *runstate.Checkpoint) {
	t.Helper()
	doc, err := cp.MarshalJSON()
	require.NoError(t, err)
	back, err := runstate.Load(doc)
	require.NoError(t, err)
	again, err := back.MarshalJSON()
	require.NoError(t, err)
	assert.Equal(t, string(doc), string(again))
}

// The front door.

// plainStore hides the session's atomic commit: the Run keeps the
// checkpoint through the digest protocol.
type plainStore struct{ s *memory.Session }

func (p plainStore) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	return p.s.LoadCheckpoint(ctx, name)
}
func (p plainStore) SaveCheckpoint(ctx context.Context, name string, doc []byte, v int64) (int64, error) {
	return p.s.SaveCheckpoint(ctx, name, doc, v)
}
func (p plainStore) DeleteCheckpoint(ctx context.Context, name string, v int64) error {
	return p.s.DeleteCheckpoint(ctx, name, v)
}

// onlySession is a session without the checkpoint capabilities.
type onlySession struct{ session.Session }

func runFlavours(t *testing.T, f func(t *testing.T, open func(t *testing.T) *runstate.Run, s session.Session)) {
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
	t.Run("atomic", func(t *testing.T) {
		s := must1(memory.New(memory.Options{}).Session("conv"))
		f(t, func(t *testing.T) *runstate.Run { return must1(runstate.Open(ctx, s, opts)) }, s)
	})
	t.Run("digests", func(t *testing.T) {
		m := must1(memory.New(memory.Options{}).Session("conv"))
		s := onlySession{m}
		o := opts
		o.Store = plainStore{m}
		f(t, func(t *testing.T) *runstate.Run { return must1(runstate.Open(ctx, s, o)) }, s)
	})
}

func TestRunApprovalFlow(t *testing.T) {
	runFlavours(t, func(t *testing.T, open func(t *testing.T) *runstate.Run, s session.Session) {
		run := open(t)
		require.NoError(t, run.Input(ctx, user("go")))
		require.NoError(t, run.Interrupt(ctx, "resp_1", items(reasoning("rs_1"), call("c1"), call("c2")), "c1", "c2"))
		assert.Equal(t, []string{"role=user"}, types(strs(must1(session.All(ctx, s)))), "withheld under the gate")

		run = open(t) // a new process
		assert.Equal(t, []string{"c1", "c2"}, run.Awaiting())
		require.NoError(t, run.Output(ctx, output("c1")))
		require.ErrorIs(t, run.Output(ctx, output("c1")), runstate.ErrNotAwaiting)
		require.ErrorIs(t, run.Settle(ctx), runstate.ErrAwaiting)

		run = open(t) // killed between the two tools: c1 is not run again
		assert.Equal(t, []string{"c2"}, run.Awaiting())
		require.NoError(t, run.Output(ctx, output("c2")))
		require.NoError(t, run.Settle(ctx, assistant("both done")))
		got := must1(session.All(ctx, s))
		assert.Equal(t, []string{"role=user", "reasoning:rs_1", "function_call:c1", "function_call:c2", "function_call_output:c1", "function_call_output:c2", "role=assistant"}, types(strs(got)))
		assert.Empty(t, history.Diagnose(got))

		run = open(t)
		assert.Nil(t, run.Awaiting())
		require.NoError(t, run.Finish(ctx, "resp_3", assistant("bye")))
		doc, _, err := plainOrSelf(s).LoadCheckpoint(ctx, runstate.DefaultName)
		require.NoError(t, err)
		assert.True(t, runstate.Idle(doc), "nothing left behind but an idle checkpoint:\n%s", doc)
	})
}

func TestRunWithoutGateSavesAtOnce(t *testing.T) {
	s := must1(memory.New(memory.Options{}).Session("conv"))
	run := must1(runstate.Open(ctx, s, runstate.Options{}))
	require.NoError(t, run.Input(ctx, user("go")))
	require.NoError(t, run.Interrupt(ctx, "resp_1", items(call("c1")), "c1"))
	assert.Equal(t, []string{"role=user", "function_call:c1"}, types(strs(must1(session.All(ctx, s)))))
	run = must1(runstate.Open(ctx, s, runstate.Options{}))
	require.NoError(t, run.Output(ctx, output("c1")))
	assert.Nil(t, run.Awaiting(), "c1 answered: the run goes on")
	got := must1(session.All(ctx, s))
	assert.Equal(t, []string{"role=user", "function_call:c1", "function_call_output:c1"}, types(strs(got)))
}

func TestRunTwoCopiesOneSettles(t *testing.T) {
	runFlavours(t, func(t *testing.T, open func(t *testing.T) *runstate.Run, s session.Session) {
		run := open(t)
		require.NoError(t, run.Input(ctx, user("go")))
		require.NoError(t, run.Interrupt(ctx, "resp_1", items(call("c1")), "c1"))
		a, b := open(t), open(t) // two processes resume the same checkpoint
		require.NoError(t, a.Output(ctx, output("c1")))
		require.NoError(t, a.Settle(ctx))
		err := b.Output(ctx, output("c1"))
		require.ErrorIs(t, err, session.ErrCheckpointConflict, "the stale copy cannot save")
		err = b.Settle(ctx)
		require.Error(t, err, "nor settle")
		got := must1(session.All(ctx, s))
		assert.Equal(t, []string{"role=user", "function_call:c1", "function_call_output:c1"}, types(strs(got)))
	})
}

func TestRunNeedsAStore(t *testing.T) {
	m := must1(memory.NewSession("conv"))
	_, err := runstate.Open(ctx, onlySession{m}, runstate.Options{})
	require.ErrorIs(t, err, runstate.ErrNoStore)
}

func TestRunRefusesATerminalCheckpoint(t *testing.T) {
	s := must1(memory.NewSession("conv"))
	cp := runstate.New()
	cp.Terminal = true
	_ = must1(s.SaveCheckpoint(ctx, runstate.DefaultName, must1(cp.MarshalJSON()), 0))
	_, err := runstate.Open(ctx, s, runstate.Options{})
	require.ErrorIs(t, err, runstate.ErrTerminal)
}

func plainOrSelf(s session.Session) runstate.Store {
	if o, ok := s.(onlySession); ok {
		return plainStore{o.Session.(*memory.Session)}
	}
	return s.(session.CheckpointStore)
}
