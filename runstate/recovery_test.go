package runstate_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// registerFailing saves a resumed batch whose append fails with fault,
// leaving the record on the checkpoint.
func registerFailing(t *testing.T, s *fakeSession, fault appendFault, batch []session.Item) *runstate.Checkpoint {
	t.Helper()
	cp := fresh(runstate.StepRunAgain)
	cp.PersistedCount = 1
	s.fault = fault
	_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: batch, Register: true})
	require.ErrorIs(t, err, errBackend)
	require.NotNil(t, cp.Pending, "the record is kept when the session errors")
	return cp
}

func TestRecoveryAfterAFailedAppend(t *testing.T) {
	batch := items(call("c1"), output("c1"))
	for _, fault := range []struct {
		name  string
		fault appendFault
	}{{"append failed before writing", failBefore}, {"acknowledgement lost", failAfter}} {
		for _, viaJSON := range []bool{false, true} {
			name := fault.name
			if viaJSON {
				name += " after a JSON round trip"
			}
			t.Run(name, func(t *testing.T) {
				s := newFake(t, "s1")
				require.NoError(t, s.Session.AddItems(ctx, items(user("hi"))))
				cp := registerFailing(t, s, fault.fault, batch)
				assert.Equal(t, 1, cp.PersistedCount, "the count advances only on success")
				require.NotNil(t, cp.Pending.Before, "before digests were taken before the append")
				assert.Len(t, cp.Pending.Before, 1, "the tail of len(items)+1 holds only the user input")
				assert.Equal(t, 3, cp.Pending.PersistedCount)
				if viaJSON {
					cp = roundTrip(t, cp)
				}
				_, err := cp.Resume(ctx, s)
				require.NoError(t, err)
				assert.Nil(t, cp.Pending)
				assert.Equal(t, 3, cp.PersistedCount, "the persisted count is the record's")
				assert.Equal(t, []string{"role=user", "function_call:c1", "function_call_output:c1"}, types(s.all(t)), "exactly once")
				assert.False(t, hasPendingKey(t, cp))
			})
		}
	}
}

func TestRecoveryRefusesWhatItCannotProve(t *testing.T) {
	batch := items(call("c1"), output("c1"))
	t.Run("partial commit: neither committed nor unchanged", func(t *testing.T) {
		s := newFake(t, "s1")
		require.NoError(t, s.Session.AddItems(ctx, items(user("hi"))))
		cp := registerFailing(t, s, failPartial, batch)
		before := s.all(t)
		_, err := cp.Resume(ctx, s)
		require.ErrorIs(t, err, runstate.ErrCannotReconcile)
		assert.Equal(t, before, s.all(t), "nothing is written")
		assert.NotNil(t, cp.Pending, "the record stays")
	})
	t.Run("foreign writer changed the tail", func(t *testing.T) {
		s := newFake(t, "s1")
		require.NoError(t, s.Session.AddItems(ctx, items(user("hi"))))
		cp := registerFailing(t, s, failBefore, batch)
		require.NoError(t, s.Session.AddItems(ctx, items(user("someone else"))))
		_, err := cp.Resume(ctx, s)
		require.ErrorIs(t, err, runstate.ErrCannotReconcile)
		assert.Equal(t, []string{"role=user", "role=user"}, types(s.all(t)))
	})
	t.Run("ambiguous: committed and unchanged at once", func(t *testing.T) {
		s := newFake(t, "s1")
		// The batch equals the tail it was registered after: [A] then [A]
		// looks both committed (tail ends with before+items) and unchanged
		// (tail ends with before).
		require.NoError(t, s.Session.AddItems(ctx, items(user("A"), user("A"))))
		d, err := history.Digest(user("A"), false)
		require.NoError(t, err)
		cp := fresh(runstate.StepRunAgain)
		cp.Pending = &runstate.PendingWrite{SessionID: "s1", Items: items(user("A")), Before: []string{d}, PersistedCount: 1}
		_, err = cp.Resume(ctx, s)
		require.ErrorIs(t, err, runstate.ErrCannotReconcile)
		assert.Equal(t, runstate.ErrCannotReconcile.Python, "Cannot reconcile the pending Session write: history changed or is ambiguous. Repair the original Session before resuming; do not rerun the completed tool.")
		assert.Len(t, s.all(t), 2)
		assert.Empty(t, s.appends)
	})
	t.Run("empty before: committed when the batch is all there is", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := registerFailing(t, s, failAfter, batch)
		assert.Equal(t, []string{}, cp.Pending.Before)
		_, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2)
		assert.Len(t, s.appends, 1, "the lost acknowledgement is accepted")
	})
	t.Run("empty before: unchanged when the session is still empty", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := registerFailing(t, s, failBefore, batch)
		_, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2)
	})
}

func TestRecoveryNeedsTheOriginalSession(t *testing.T) {
	batch := items(call("c1"), output("c1"))
	t.Run("different session", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := registerFailing(t, s, failBefore, batch)
		other := newFake(t, "s2")
		_, err := cp.Resume(ctx, other)
		require.ErrorIs(t, err, runstate.ErrWrongSession)
		assert.Equal(t, "Resume the pending Session write with the original Session and session ID", runstate.ErrWrongSession.Python)
		assert.Empty(t, other.all(t))
		assert.Zero(t, other.calls, "nothing is read or written")
		assert.NotNil(t, cp.Pending)
	})
	t.Run("missing session", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := registerFailing(t, s, failBefore, batch)
		_, err := cp.Resume(ctx, nil)
		require.ErrorIs(t, err, runstate.ErrWrongSession)
		assert.NotNil(t, cp.Pending)
	})
}

func TestRecoveryKeepsTheRecordWhenTheSessionErrors(t *testing.T) {
	batch := items(call("c1"), output("c1"))
	t.Run("first tail read fails: before stays null", func(t *testing.T) {
		s := newFake(t, "s1")
		s.fault = failReadOnce
		cp := fresh(runstate.StepRunAgain)
		_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: batch, Register: true})
		require.ErrorIs(t, err, errBackend)
		require.NotNil(t, cp.Pending)
		assert.Nil(t, cp.Pending.Before)
		back := roundTrip(t, cp)
		assert.Nil(t, back.Pending.Before)
		_, err = back.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2)
	})
	t.Run("recovery read fails", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := registerFailing(t, s, failBefore, batch)
		s.fault = failReadOnce
		_, err := cp.Resume(ctx, s)
		require.ErrorIs(t, err, errBackend)
		assert.NotNil(t, cp.Pending)
		assert.False(t, cp.InProgress(), "the guard is released on every exit")
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2)
	})
	t.Run("recovery append fails again", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := registerFailing(t, s, failBefore, batch)
		s.fault = failBefore
		_, err := cp.Resume(ctx, s)
		require.ErrorIs(t, err, errBackend)
		assert.NotNil(t, cp.Pending)
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2)
	})
}

func TestRecoveryInProgressGuard(t *testing.T) {
	s := newFake(t, "s1")
	cp := registerFailing(t, s, failBefore, items(call("c1"), output("c1")))
	var nested error
	s.onRead = func() { _, nested = cp.Resume(ctx, s) }
	_, err := cp.Resume(ctx, s)
	require.NoError(t, err)
	require.ErrorIs(t, nested, runstate.ErrWriteInProgress)
	assert.Equal(t, "The pending Session write is already in progress for this RunState", runstate.ErrWriteInProgress.Python)
	assert.Len(t, s.all(t), 2, "the nested attempt wrote nothing")

	// A clone is a checkpoint copy: its guard starts released.
	cp2 := registerFailing(t, newFake(t, "s3"), failBefore, items(call("c2"), output("c2")))
	s3 := newFake(t, "s3")
	var cloneErr error
	s3.onRead = func() { _, cloneErr = cp2.Clone().Resume(ctx, newFake(t, "s3")) }
	_, err = cp2.Resume(ctx, s3)
	require.NoError(t, err)
	assert.NoError(t, cloneErr, "independently copied checkpoints are not interlocked")
}

func TestSingleSlot(t *testing.T) {
	s := newFake(t, "s1")
	cp := registerFailing(t, s, failBefore, items(call("c1"), output("c1")))
	n := len(s.appends)
	_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c2"), output("c2")), Register: true})
	require.ErrorIs(t, err, runstate.ErrSlotOccupied)
	assert.Equal(t, "Resolve the pending Session write before saving another batch", runstate.ErrSlotOccupied.Python)
	assert.Len(t, s.appends, n, "nothing is written")
	assert.Equal(t, "c1", cp.Pending.Items[0].CallID(), "the standing record is untouched")
	err = cp.Park(s, items(call("c3")), runstate.ParkOptions{})
	require.ErrorIs(t, err, runstate.ErrSlotOccupied, "a park cannot replace an ordinary record")
	_, err = cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c9"))})
	require.ErrorIs(t, err, runstate.ErrSlotOccupied)
}

func TestTerminalRefusesBeforeAnySessionAccess(t *testing.T) {
	cp, err := runstate.Load(edit(t, "features/v1_18_held_pending_session_write.json", func(d map[string]any) {
		d["terminal_unrecoverable"] = true
	}))
	require.NoError(t, err)
	_, err = cp.Resume(ctx, untouchable{t, "session-118"})
	require.ErrorIs(t, err, runstate.ErrTerminal)
	assert.Contains(t, err.Error(), "cannot be resumed")
	assert.NotNil(t, cp.Pending)
}

func TestRecoveryThroughTheFallbacks(t *testing.T) {
	t.Run("a session without LatestReader is read fully and cut locally", func(t *testing.T) {
		f := newFake(t, "s1")
		require.NoError(t, f.Session.AddItems(ctx, items(user("a"), user("b"), user("c"))))
		s := legacy{f}
		_, ok := session.Session(s).(session.LatestReader)
		require.False(t, ok)
		f.fault = failAfter
		cp := fresh(runstate.StepInterruption)
		_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
		require.ErrorIs(t, err, errBackend)
		assert.Len(t, cp.Pending.Before, 3)
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, f.all(t), 5)
		assert.Zero(t, f.reads, "LatestItems is never called")
	})
	t.Run("a context-aware session sees the run context on every call", func(t *testing.T) {
		f := newFake(t, "s1")
		s := contextAware{f}
		rctx := session.WithRunContext(ctx, "run-ctx")
		f.fault = failBefore
		cp := fresh(runstate.StepRunAgain)
		_, err := cp.Save(rctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
		require.ErrorIs(t, err, errBackend)
		_, err = cp.Resume(rctx, s)
		require.NoError(t, err)
		require.NotEmpty(t, f.rcSeen)
		for i, seen := range f.rcSeen {
			assert.True(t, seen, "call %d", i)
		}
	})
	t.Run("a session that does not accept it sees it on no call", func(t *testing.T) {
		f := newFake(t, "s1")
		rctx := session.WithRunContext(ctx, "run-ctx")
		cp := fresh(runstate.StepRunAgain)
		_, err := cp.Save(rctx, f, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
		require.NoError(t, err)
		require.NotEmpty(t, f.rcSeen)
		for _, seen := range f.rcSeen {
			assert.False(t, seen)
		}
	})
}

func TestIDInsensitiveRecovery(t *testing.T) {
	// A Conversations-like backend rewrites ids: recovery ignores them.
	f := newFake(t, "conv_1")
	s := conversation{f}
	cp := fresh(runstate.StepRunAgain)
	f.fault = failAfter
	_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
	require.ErrorIs(t, err, errBackend)
	// The backend assigned ids to what it stored.
	stored := f.all(t)
	require.NoError(t, f.Session.Clear(ctx))
	for i, raw := range stored {
		withID := `{"id":"srv_` + string(rune('a'+i)) + `",` + raw[1:]
		require.NoError(t, f.Session.AddItems(ctx, items(session.MustItem(withID))))
	}
	_, err = cp.Resume(ctx, s)
	require.NoError(t, err, "committed despite the rewritten ids")
	assert.Len(t, f.all(t), 2)
	assert.Len(t, f.appends, 1)

	// The same history on an id-sensitive session cannot be reconciled.
	g := newFake(t, "conv_1")
	cp2 := fresh(runstate.StepRunAgain)
	g.fault = failAfter
	_, err = cp2.Save(ctx, g, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
	require.ErrorIs(t, err, errBackend)
	stored = g.all(t)
	require.NoError(t, g.Session.Clear(ctx))
	for i, raw := range stored {
		withID := `{"id":"srv_` + string(rune('a'+i)) + `",` + raw[1:]
		require.NoError(t, g.Session.AddItems(ctx, items(session.MustItem(withID))))
	}
	_, err = cp2.Resume(ctx, g)
	require.True(t, errors.Is(err, runstate.ErrCannotReconcile))
}
