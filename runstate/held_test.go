package runstate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func TestHeldFixturesSettleAtEntry(t *testing.T) {
	for _, name := range []string{"features/v1_18_held_pending_session_write.json", "features/v1_19_held_pending_session_write.json"} {
		for _, viaJSON := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				cp, err := runstate.Load(fixture(t, name))
				require.NoError(t, err)
				if viaJSON {
					cp = roundTrip(t, cp)
				}
				s := newFake(t, "session-118")
				res, err := cp.Resume(ctx, s)
				require.NoError(t, err)
				require.Len(t, s.appends, 1, "one append")
				assert.Equal(t, []string{"function_call:call_held_1", "function_call_output:call_held_1"}, types(s.all(t)), "call then output")
				assert.Equal(t, 2, res.Count)
				assert.Equal(t, 2, cp.PersistedCount, "settled held items count")
				assert.Nil(t, cp.Pending)
				assert.False(t, hasPendingKey(t, cp))
			})
		}
	}
}

func TestHeldEntryRules(t *testing.T) {
	held := func(t *testing.T, kind runstate.StepKind) *runstate.Checkpoint {
		cp := fresh(kind)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1"), output("c1")), runstate.ParkOptions{ResponseID: ptr("resp_parked")}))
		return cp
	}
	t.Run("an interruption checkpoint rides untouched", func(t *testing.T) {
		cp := held(t, runstate.StepInterruption)
		want := cp.Pending.Clone()
		_, err := cp.Resume(ctx, untouchable{t, "s1"})
		require.NoError(t, err)
		assert.Equal(t, want, cp.Pending)
	})
	t.Run("a detached resume rides untouched", func(t *testing.T) {
		cp := held(t, runstate.StepRunAgain)
		want := cp.Pending.Clone()
		_, err := cp.Resume(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, want, cp.Pending)
	})
	for _, kind := range []runstate.StepKind{runstate.StepRunAgain, runstate.StepInterruption} {
		t.Run("a different attached session fails at boot: "+string(kind), func(t *testing.T) {
			cp := held(t, kind)
			_, err := cp.Resume(ctx, untouchable{t, "s2"})
			require.ErrorIs(t, err, runstate.ErrWrongSession)
			assert.True(t, cp.HasHeld())
		})
	}
	t.Run("the entry settle pairs the batch alone", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1"), output("c1"), call("c2")), runstate.ParkOptions{}))
		s := newFake(t, "s1")
		_, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(s.all(t)))
		assert.Nil(t, cp.Pending, "the slot is cleared")
	})
	t.Run("nothing pairs: the slot is cleared, nothing written", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c2")), runstate.ParkOptions{}))
		s := newFake(t, "s1")
		_, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Nil(t, cp.Pending)
		assert.Empty(t, s.appends)
	})
	t.Run("the entry settle restores the Conversations sanitisation", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		// A detached fold added items without the backend in hand.
		cp.Pending = &runstate.PendingWrite{SessionID: "conv_1", Held: true, Items: items(
			session.MustItem(`{"type":"function_call","id":"__fake_id__","call_id":"c1","name":"t","arguments":"{}","provider_data":{"m":1}}`),
			session.MustItem(`{"type":"function_call_output","id":"fc_out","call_id":"c1","output":"ok","_agents_tool_title":"T"}`),
		)}
		f := newFake(t, "conv_1")
		_, err := cp.Resume(ctx, conversation{f})
		require.NoError(t, err)
		assert.Equal(t, []string{
			`{"type":"function_call","call_id":"c1","name":"t","arguments":"{}"}`,
			`{"type":"function_call_output","call_id":"c1","output":"ok"}`,
		}, f.all(t))
	})
}

func TestHeldSettleCrashIsRecovered(t *testing.T) {
	type exit int
	const (
		atEntry exit = iota
		atExit
	)
	for _, where := range []exit{atEntry, atExit} {
		for _, fault := range []appendFault{failBefore, failAfter} {
			for _, viaJSON := range []bool{false, true} {
				t.Run("", func(t *testing.T) {
					s := newFake(t, "s1")
					require.NoError(t, s.Session.AddItems(ctx, items(user("go"))))
					cp := fresh(runstate.StepInterruption)
					require.NoError(t, cp.Park(s, items(call("c1")), runstate.ParkOptions{}))
					s.fault = fault
					var err error
					if where == atEntry {
						cp.Pending.Items = append(cp.Pending.Items, output("c1")) // a detached fold
						cp.SetStep(runstate.StepRunAgain)
						_, err = cp.Resume(ctx, s)
					} else {
						held := cp.TakeHeld()
						cp.SetStep(runstate.StepRunAgain)
						_, err = cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
					}
					require.ErrorIs(t, err, errBackend)
					require.NotNil(t, cp.Pending, "the settling batch registered before its append")
					assert.False(t, cp.Pending.Held, "as the ordinary pending write")
					assert.NotNil(t, cp.Pending.Before)
					assert.Equal(t, 2, cp.Pending.PersistedCount, "the record counts the settled held items")
					if viaJSON {
						cp = roundTrip(t, cp)
					}
					_, err = cp.Resume(ctx, s)
					require.NoError(t, err)
					assert.Equal(t, []string{"role=user", "function_call:c1", "function_call_output:c1"}, types(s.all(t)))
					assert.Nil(t, cp.Pending)
					assert.Equal(t, 2, cp.PersistedCount)
				})
			}
		}
	}
}

func TestFailedFinalSettleFailsClosed(t *testing.T) {
	for _, covered := range []bool{false, true} {
		t.Run("", func(t *testing.T) {
			s := newFake(t, "s1")
			cp := fresh(runstate.StepInterruption)
			require.NoError(t, cp.Park(s, items(call("c1")), runstate.ParkOptions{}))
			held := cp.TakeHeld()
			cp.SetStep(runstate.StepFinalOutput)
			final := items(output("c1"), assistant("done"))
			if covered {
				// A guardrail rebuild already carries the held call: the batch
				// is dropped as redundant, yet recovery stays armed.
				final = items(call("c1"), output("c1"), assistant("done"))
			}
			s.fault = failBefore
			_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: final, Held: held})
			require.ErrorIs(t, err, errBackend)
			require.NotNil(t, cp.Pending, "the batch is recorded")
			b, err := cp.MarshalJSON()
			require.NoError(t, err)
			// Fail closed, readably: the document is terminal and keeps
			// the batch; Load reads it back, Resume refuses it.
			back, err := runstate.Load(b)
			require.NoError(t, err)
			assert.True(t, back.Terminal)
			require.NotNil(t, back.Pending)
			assert.Equal(t, types(strs(cp.Pending.Items)), types(strs(back.Pending.Items)))
			_, err = back.Resume(ctx, s)
			assert.ErrorIs(t, err, runstate.ErrTerminal)
			again, err := back.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, string(b), string(again), "written back byte for byte")
			// Python's own mid-settle document (no marker) is still refused.
			var doc map[string]any
			require.NoError(t, json.Unmarshal(b, &doc))
			delete(doc, "terminal_unrecoverable")
			py, err := json.Marshal(doc)
			require.NoError(t, err)
			_, err = runstate.Load(py)
			var le *runstate.LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, runstate.RulePendingStep, le.Rule)
		})
	}
}

func TestPark(t *testing.T) {
	t.Run("registering never touches the session", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		cp.PersistedCount = 1
		err := cp.Park(untouchable{t, "s1"}, items(reasoning("rs_1"), call("c1")), runstate.ParkOptions{
			Policy: ptr(runstate.PolicyOmit), ResponseID: ptr("resp_1"), Store: ptr(false)})
		require.NoError(t, err)
		w := cp.Pending
		require.NotNil(t, w)
		assert.True(t, w.Held)
		assert.Nil(t, w.Before)
		assert.Equal(t, "s1", w.SessionID)
		assert.Equal(t, 3, w.PersistedCount, "current count + newly converted items")
		assert.Equal(t, runstate.Some("resp_1"), w.ResponseIDOpt())
		assert.Equal(t, runstate.Some(false), w.StoreOpt())
		assert.Equal(t, runstate.Some(runstate.PolicyOmit), w.PolicyOpt(), "the policy it used")
		assert.Equal(t, `{"type":"reasoning","summary":[]}`, w.Items[0].String(), "converted under omit")
		back := roundTrip(t, cp)
		bw := back.Pending
		for i := range w.Items {
			assert.Equal(t, canonical(t, w.Items[i].Bytes()), canonical(t, bw.Items[i].Bytes()))
		}
		assert.Equal(t, []any{w.SessionID, w.Before, w.PersistedCount, w.Held, w.ResponseIDOpt(), w.StoreOpt(), w.PolicyOpt()},
			[]any{bw.SessionID, bw.Before, bw.PersistedCount, bw.Held, bw.ResponseIDOpt(), bw.StoreOpt(), bw.PolicyOpt()})
	})
	t.Run("a park without response records null keys", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{}))
		assert.Equal(t, runstate.Null[string](), cp.Pending.ResponseIDOpt())
		assert.Equal(t, runstate.Null[bool](), cp.Pending.StoreOpt())
		assert.Equal(t, runstate.Null[runstate.Policy](), cp.Pending.PolicyOpt())
	})
	t.Run("nothing to register", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s1"), nil, runstate.ParkOptions{}))
		assert.Nil(t, cp.Pending)
		require.NoError(t, cp.Park(nil, items(call("c1")), runstate.ParkOptions{}), "detached with no standing record")
		assert.Nil(t, cp.Pending)
		require.NoError(t, cp.Park(conversation{newFake(t, "conv")}, items(reasoning("")), runstate.ParkOptions{}), "unpersistable")
		assert.Nil(t, cp.Pending)
	})
	t.Run("a re-park keeps one canonical batch", func(t *testing.T) {
		for _, parked := range []*bool{nil, ptr(false), ptr(true)} {
			cp := fresh(runstate.StepInterruption)
			s := newFake(t, "s1")
			require.NoError(t, cp.Park(s, items(call("c1"), call("c2")), runstate.ParkOptions{ResponseID: ptr("resp_1"), Store: parked}))
			cp = roundTrip(t, cp)
			// Partial approval: c1 ran, c2 interrupts again.
			require.NoError(t, cp.Park(s, items(call("c1"), output("c1"), call("c2")), runstate.ParkOptions{ResponseID: ptr("resp_2"), Store: ptr(true)}))
			w := cp.Pending
			assert.Equal(t, []string{"function_call:c1", "function_call:c2", "function_call_output:c1"}, types(strs(w.Items)))
			assert.Equal(t, runstate.Some("resp_1"), w.ResponseIDOpt(), "the batch is that response's write")
			assert.Equal(t, runstate.OptFromPtr(parked), w.StoreOpt(), "the store the response was produced under")
		}
	})
	t.Run("a detached re-park folds under the batch's policy", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{Policy: ptr(runstate.PolicyPreserve)}))
		require.NoError(t, cp.Park(nil, items(reasoning("rs_2"), call("c2")), runstate.ParkOptions{Policy: ptr(runstate.PolicyOmit)}))
		assert.Equal(t, "rs_2", cp.Pending.Items[1].ID(), "preserved, as the record says")
		assert.Equal(t, "s1", cp.Pending.SessionID)
		require.NoError(t, cp.ExtendHeld(items(reasoning("rs_3"))))
		assert.Equal(t, "rs_3", cp.Pending.Items[3].ID())
	})
	t.Run("a Conversations registration forces the policy to null and sanitises", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		it := session.MustItem(`{"type":"function_call","id":"fc_1","call_id":"c1","name":"t","arguments":"{}"}`)
		require.NoError(t, cp.Park(conversation{newFake(t, "conv")}, items(reasoning("rs_1"), it), runstate.ParkOptions{Policy: ptr(runstate.PolicyOmit)}))
		assert.Equal(t, runstate.Null[runstate.Policy](), cp.Pending.PolicyOpt())
		assert.Equal(t, "rs_1", cp.Pending.Items[0].ID(), "the server reasoning id stays persistable")
		assert.False(t, cp.Pending.Items[1].HasField("id"))
	})
	t.Run("a park for another session is refused", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{}))
		require.ErrorIs(t, cp.Park(newFake(t, "s2"), items(call("c2")), runstate.ParkOptions{}), runstate.ErrWrongSession)
	})
	t.Run("extend is a no-op without a held record", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		require.NoError(t, cp.ExtendHeld(items(output("c1"))))
		assert.Nil(t, cp.Pending)
		cp.Pending = &runstate.PendingWrite{SessionID: "s1", Items: items(output("c0"))}
		require.NoError(t, cp.ExtendHeld(items(output("c1"))))
		assert.Len(t, cp.Pending.Items, 1)
	})
	t.Run("take frees the slot", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		assert.Nil(t, cp.TakeHeld())
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{}))
		assert.Equal(t, []string{"function_call:c1"}, types(strs(cp.TakeHeld())))
		assert.Nil(t, cp.Pending)
		cp.Pending = &runstate.PendingWrite{SessionID: "s1", Items: items(output("c0"))}
		assert.Nil(t, cp.TakeHeld(), "an ordinary record is not taken")
		assert.NotNil(t, cp.Pending)
	})
}

// parkedAndResolved parks call c1 under the gate and returns a checkpoint
// whose resume resolved into run-again with c1's output.
func parkedAndResolved(t *testing.T, s session.Session, calls ...string) *runstate.Checkpoint {
	t.Helper()
	cp := fresh(runstate.StepInterruption)
	var batch []session.Item
	for _, c := range calls {
		batch = append(batch, call(c))
	}
	require.NoError(t, cp.Park(s, batch, runstate.ParkOptions{ResponseID: ptr("resp_parked")}))
	return roundTrip(t, cp)
}

func TestHeldExitSettle(t *testing.T) {
	t.Run("the batch and the resolved turn land as one ordered write", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1")
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		res, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
		n := cp.PersistedCount
		require.NoError(t, err)
		require.Len(t, s.appends, 1)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(strs(s.appends[0])))
		assert.Equal(t, 2, res.Count)
		assert.Equal(t, 2, n)
		assert.Nil(t, cp.Pending)
	})
	t.Run("a dropped output takes its held call with it", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1", "c2")
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(s.all(t)))
	})
	t.Run("calls still pending approval settle unpaired", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1", "c2")
		held := cp.TakeHeld()
		cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c2"}}
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call:c2", "function_call_output:c1"}, types(s.all(t)))
		assert.Equal(t, 3, cp.PersistedCount)
	})
	t.Run("a batch the rebuild covers is dropped as redundant", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(s, items(assistant("let me check"), call("c1")), runstate.ParkOptions{}))
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepFinalOutput)
		rebuild := items(assistant("let me check"), call("c1"), output("c1"), assistant("done"))
		require.True(t, runstate.CoversHeld(rebuild, held, nil))
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: rebuild, Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"role=assistant", "function_call:c1", "function_call_output:c1", "role=assistant"}, types(s.all(t))[0:4])
		assert.Len(t, s.all(t), 4, "the unkeyed preamble lands once")
	})
	t.Run("the settled count is what the append wrote", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1")
		require.NoError(t, cp.ExtendHeld(items(output("c1")))) // the committer folded the output
		held := cp.TakeHeld()
		require.Len(t, held, 2)
		cp.SetStep(runstate.StepRunAgain)
		res, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
		n := cp.PersistedCount
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2)
		assert.Equal(t, 2, res.Count, "the re-delivered output dedups away")
		assert.Equal(t, 2, n)
	})
	t.Run("an output folded this turn that the filter removed is withdrawn", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1", "c2")
		require.NoError(t, cp.ExtendHeld(items(output("c1"), output("c2"))))
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(s.all(t)))
	})
	t.Run("carried history from an earlier process always settles", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1", "c2")
		require.NoError(t, cp.ExtendHeld(items(output("c1"), output("c2"))))
		cp = roundTrip(t, cp) // a later process
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call:c2", "function_call_output:c2", "function_call_output:c1"}, types(s.all(t)))
	})
	t.Run("an emptied resolved turn settles the paired part", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1")
		handoff := session.MustItem(`{"type":"function_call","call_id":"h1","name":"transfer_to_b","arguments":"{}"}`)
		require.NoError(t, cp.ExtendHeld(items(output("c1"), handoff)))
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(s.all(t)), "the executed pair; the unpaired handoff call drops")
		assert.Nil(t, cp.Pending)
	})
	t.Run("a live checkpoint's next run forgets earlier folds", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1", "c2")
		// Run 2 (partial approval): c1 ran, its output folded; c2 re-parks.
		require.NoError(t, cp.ExtendHeld(items(output("c1"))))
		cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c2"}}
		// Run 3 on the same live checkpoint: c2 approved and ran.
		_, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err = cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c2")), Held: held})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call:c2", "function_call_output:c1", "function_call_output:c2"}, types(s.all(t)))
	})
	t.Run("a new turn forgets what was folded", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parkedAndResolved(t, s, "c1", "c2")
		require.NoError(t, cp.ExtendHeld(items(output("c1"), output("c2"))))
		cp.StartTurn()
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(assistant("next")), Held: held})
		require.NoError(t, err)
		assert.Len(t, s.all(t), 5)
	})
	t.Run("detached: nothing is saved", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		res, err := cp.SaveResumedTurn(ctx, nil, runstate.ResumedTurn{Items: items(output("c1"))})
		n := cp.PersistedCount
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.Zero(t, res.Count)
	})
}

func TestSettledHeldItemsCountTowardTheGate(t *testing.T) {
	for _, compacting := range []bool{false, true} {
		t.Run("", func(t *testing.T) {
			f := newFake(t, "s1")
			var s session.Session = f
			if compacting {
				s = &compactor{fakeSession: f}
			}
			cp := parkedAndResolved(t, s, "c1", "c2")
			held := cp.TakeHeld()
			// The gate is off for this resume: partial approval settles c1.
			cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c2"}}
			_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held, ResponseID: "resp_2"})
			n := cp.PersistedCount
			require.NoError(t, err)
			assert.Equal(t, 3, n)
			cp = roundTrip(t, cp)
			// A later resume turns the gate back on: it fails fast.
			err = cp.CheckOutputGuardrailGate(runstate.Gate{OutputGuardrails: true, Deferral: true, BoundaryProven: true, SessionAttached: true})
			require.ErrorIs(t, err, runstate.ErrPersistedBeforeGate)
		})
	}
}

func TestOutputGuardrailGate(t *testing.T) {
	all := runstate.Gate{OutputGuardrails: true, Deferral: true, BoundaryProven: true, SessionAttached: true}
	cases := []struct {
		name  string
		kind  runstate.StepKind
		count int
		gate  runstate.Gate
		err   error
		after int
	}{
		{"not an interruption", runstate.StepRunAgain, 2, all, nil, 2},
		{"no output guardrails", runstate.StepInterruption, 2, runstate.Gate{Deferral: true, SessionAttached: true}, nil, 2},
		{"boundary unproven", runstate.StepInterruption, 0, runstate.Gate{OutputGuardrails: true, Deferral: true}, runstate.ErrBoundaryUnproven, 0},
		{"persisted with a session", runstate.StepInterruption, 2, all, runstate.ErrPersistedBeforeGate, 2},
		{"persisted without a session resets", runstate.StepInterruption, 2, runstate.Gate{OutputGuardrails: true, Deferral: true, BoundaryProven: true}, nil, 0},
		{"deferral gate off", runstate.StepInterruption, 2, runstate.Gate{OutputGuardrails: true, BoundaryProven: true, SessionAttached: true}, nil, 2},
		{"nothing persisted", runstate.StepInterruption, 0, all, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := fresh(tc.kind)
			cp.PersistedCount = tc.count
			err := cp.CheckOutputGuardrailGate(tc.gate)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.after, cp.PersistedCount)
		})
	}
	assert.Equal(t, "Cannot resume a serialized approval checkpoint with output guardrails because the current response boundary cannot be proven. Start a new run from safe input.", runstate.ErrBoundaryUnproven.Python)
	assert.Equal(t, "Cannot resume an approval checkpoint with output guardrails after current-turn items were persisted. Start a new run from safe input.", runstate.ErrPersistedBeforeGate.Python)
	assert.True(t, runstate.ShouldDefer(true, "stop_on_first_tool"))
	assert.False(t, runstate.ShouldDefer(true, "run_llm_again"))
	assert.False(t, runstate.ShouldDefer(false, "stop_on_first_tool"))
}

func TestDiscardHeld(t *testing.T) {
	parked := func(t *testing.T) *runstate.Checkpoint {
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(newFake(t, "s1"), items(assistant("preamble"), call("c1")), runstate.ParkOptions{}))
		return cp
	}
	// The detached completion and the max-turns completion discard only
	// once their exit succeeded.
	for _, reason := range []string{"detached-completion", "max-turns-completion"} {
		t.Run(reason+": a failed exit keeps the record", func(t *testing.T) {
			cp := parked(t)
			err := cp.DiscardHeldAfter(ctx, func(context.Context) error { return errBackend })
			require.ErrorIs(t, err, errBackend)
			assert.True(t, cp.HasHeld())
		})
		t.Run(reason+": a completed exit clears it", func(t *testing.T) {
			cp := parked(t)
			require.NoError(t, cp.DiscardHeldAfter(ctx, func(context.Context) error { return nil }))
			assert.Nil(t, cp.Pending)
			cp.SetStep(runstate.StepFinalOutput)
			b, err := cp.MarshalJSON()
			require.NoError(t, err)
			_, err = runstate.Load(b)
			require.NoError(t, err, "the finished run's checkpoint stays loadable")
		})
	}
	t.Run("tripwire: only the sanitised rebuild is persisted", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := parked(t)
		assert.True(t, cp.DiscardHeld())
		rebuild := items(
			session.MustItem(`{"type":"function_call","call_id":"c1","name":"write_thing","arguments":""}`),
			session.MustItem(`{"type":"function_call_output","call_id":"c1","output":"Output withheld by an output guardrail."}`),
		)
		cp.SetStep(runstate.StepFinalOutput)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: rebuild, Held: cp.TakeHeld()})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(s.all(t)), "the preamble is not resurrected")
	})
	t.Run("an ordinary record is never discarded", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		cp.Pending = &runstate.PendingWrite{SessionID: "s1", Items: items(output("c0"))}
		assert.False(t, cp.DiscardHeld())
		assert.NotNil(t, cp.Pending)
	})
}

func TestPairingGuard(t *testing.T) {
	mcpReq := func(id string) session.Item {
		return session.MustItem(`{"type":"mcp_approval_request","id":"` + id + `","server_label":"s","name":"t","arguments":"{}"}`)
	}
	mcpResp := func(id string) session.Item {
		return session.MustItem(`{"type":"mcp_approval_response","approval_request_id":"` + id + `","approve":true}`)
	}
	typed := func(typ, id string) session.Item {
		return session.MustItem(`{"type":"` + typ + `","call_id":"` + id + `"}`)
	}
	cases := []struct {
		name     string
		held     []session.Item
		resolved []session.Item
		pending  []string
		want     []string
	}{
		{"paired call settles", items(call("c1")), items(output("c1")), nil, []string{"function_call:c1"}},
		{"unpaired call is dropped", items(call("c1")), nil, nil, []string{}},
		{"pairing is per call", items(call("c1"), call("c2")), items(output("c2")), nil, []string{"function_call:c2"}},
		{"an output inside the batch pairs", items(call("c1"), output("c1")), nil, nil, []string{"function_call:c1", "function_call_output:c1"}},
		{"pending calls settle unpaired", items(call("c1"), call("c2")), nil, []string{"c2"}, []string{"function_call:c2"}},
		{"reasoning before a dropped call goes with it", items(reasoning("rs_1"), call("c1"), reasoning("rs_2"), call("c2")), items(output("c1")), nil,
			[]string{"reasoning:rs_1", "function_call:c1"}},
		{"a lone reasoning item stays", items(reasoning("rs_1"), assistant("hi")), nil, nil, []string{"reasoning:rs_1", "role=assistant"}},
		{"a preamble survives", items(assistant("checking"), call("c1")), items(output("c1")), nil, []string{"role=assistant", "function_call:c1"}},
		{"shell call pairs through the map", items(typed("shell_call", "sh1")), items(typed("shell_call_output", "sh1")), nil, []string{"shell_call:sh1"}},
		{"shell call needs its own output type", items(typed("shell_call", "sh1")), items(typed("function_call_output", "sh1")), nil, []string{}},
		{"custom tool call pairs", items(typed("custom_tool_call", "ct1")), items(typed("custom_tool_call_output", "ct1")), nil, []string{"custom_tool_call:ct1"}},
		{"apply_patch pending exemption", items(typed("apply_patch_call", "ap1")), nil, []string{"ap1"}, []string{"apply_patch_call:ap1"}},
		{"MCP request with its response", items(mcpReq("mcpr_1")), items(mcpResp("mcpr_1")), nil, []string{"mcp_approval_request:mcpr_1"}},
		{"MCP request without a response", items(mcpReq("mcpr_1"), mcpReq("mcpr_2")), items(mcpResp("mcpr_1")), nil, []string{"mcp_approval_request:mcpr_1"}},
		{"MCP request still pending", items(mcpReq("mcpr_2")), nil, []string{"mcpr_2"}, []string{"mcp_approval_request:mcpr_2"}},
		{"MCP response inside the batch", items(mcpReq("mcpr_1"), mcpResp("mcpr_1")), nil, nil, []string{"mcp_approval_request:mcpr_1", "mcp_approval_response:mcpr_1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := runstate.SafeToSettle(tc.held, tc.resolved, nil, tc.pending)
			assert.Equal(t, tc.want, types(strs(got)))
		})
	}
	t.Run("cover detection", func(t *testing.T) {
		held := items(assistant("pre"), call("c1"), mcpReq("mcpr_1"))
		assert.True(t, runstate.CoversHeld(items(call("c1"), mcpReq("mcpr_1")), held, nil))
		assert.False(t, runstate.CoversHeld(items(call("c1")), held, nil))
		assert.False(t, runstate.CoversHeld(items(output("c1"), mcpResp("mcpr_1")), held, nil), "outputs are not requests")
		assert.True(t, runstate.CoversHeld(nil, items(assistant("pre")), nil), "a batch without requests is covered, as in Python")
	})
}
