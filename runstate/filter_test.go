package runstate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// A handoff filter at a resumed turn's exit has authority over the outputs
// folded into the held batch this turn (semantics §3.5.3): an output it
// removed stays out of the Session and takes its call with it. The rule is
// the same whether the exit has a session (SaveResumedTurn) or not
// (HoldResumedTurn, then the reattach's entry settle), and whether the
// detached checkpoint is reattached live or after a JSON round trip.

// filterCase is one resumed turn: what was parked, what the committer
// folded, and the filter's view of the resolved items at the exit.
type filterCase struct {
	name   string
	parked []session.Item
	folded []session.Item
	view   []session.Item
	// foldedEarlier: the outputs were folded by an earlier process (a
	// round trip between the fold and the exit), so they are carried
	// history the filter cannot withdraw.
	foldedEarlier bool
	want          []string // the Session after the exit (attached) or the reattach (detached)
	// held is the held record a detached exit leaves, as the Python SDK's
	// leaves it: a withdrawn output's call stays until the entry settle
	// drops it (its test_entry_settle_drops_a_held_call_the_filter_unpaired).
	// nil: want.
	held []string
}

var filterCases = []filterCase{
	{
		name:   "a removed output and its call stay out",
		parked: items(call("c1"), reasoning("rs_2"), call("c2")),
		folded: items(output("c1"), output("c2")),
		view:   items(output("c1")),
		want:   []string{"function_call:c1", "function_call_output:c1"},
		held:   []string{"function_call:c1", "reasoning:rs_2", "function_call:c2", "function_call_output:c1"},
	},
	{
		name:   "the view's own items ride along",
		parked: items(call("c1"), call("c2")),
		folded: items(output("c1"), output("c2")),
		view:   items(output("c2"), assistant("handed off")),
		want:   []string{"function_call:c2", "function_call_output:c2", "role=assistant"},
		held:   []string{"function_call:c1", "function_call:c2", "function_call_output:c2", "role=assistant"},
	},
	{
		name:   "an emptied turn withdraws nothing",
		parked: items(call("c1"), call("c2")),
		folded: items(output("c1"), output("c2")),
		view:   nil,
		want:   []string{"function_call:c1", "function_call:c2", "function_call_output:c1", "function_call_output:c2"},
	},
	{
		name:   "a batch withdrawn whole leaves only the view",
		parked: items(call("c1")),
		folded: items(output("c1")),
		view:   items(assistant("x")),
		want:   []string{"role=assistant"},
		held:   []string{"function_call:c1", "role=assistant"},
	},
	{
		name:          "carried history from an earlier process always settles",
		parked:        items(call("c1"), call("c2")),
		folded:        items(output("c1"), output("c2")),
		view:          items(output("c1")),
		foldedEarlier: true,
		want:          []string{"function_call:c1", "function_call:c2", "function_call_output:c2", "function_call_output:c1"},
	},
}

// resumedTurn parks tc.parked under the gate, then runs the resume up to
// its exit: entry (with s, nil when detached), the tools' outputs folded as
// they commit, and the resolved step.
func resumedTurn(t *testing.T, tc filterCase, s session.Session) *runstate.Checkpoint {
	t.Helper()
	cp := fresh(runstate.StepInterruption)
	require.NoError(t, cp.Park(newFake(t, "s1"), tc.parked, runstate.ParkOptions{ResponseID: ptr("resp_parked")}))
	cp = roundTrip(t, cp) // the approval interruption is stored
	_, err := cp.Resume(ctx, s)
	require.NoError(t, err)
	require.True(t, cp.HasHeld(), "the interruption's batch rides the resume")
	for _, out := range tc.folded {
		require.NoError(t, cp.ExtendHeld(items(out)))
	}
	if tc.foldedEarlier {
		cp = roundTrip(t, cp)
	}
	cp.SetStep(runstate.StepRunAgain)
	return cp
}

func TestHandoffFilterWithdrawal(t *testing.T) {
	for _, tc := range filterCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("attached exit", func(t *testing.T) {
				s := newFake(t, "s1")
				cp := resumedTurn(t, tc, s)
				_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: tc.view, Held: cp.TakeHeld(), ResponseID: "resp_2"})
				require.NoError(t, err)
				assert.Equal(t, tc.want, types(s.all(t)))
				assert.Nil(t, cp.Pending)
			})
			for _, viaJSON := range []bool{false, true} {
				name := "detached exit, reattached live"
				if viaJSON {
					name = "detached exit, reattached through JSON"
				}
				t.Run(name, func(t *testing.T) {
					cp := resumedTurn(t, tc, nil)
					require.NoError(t, cp.HoldResumedTurn(tc.view))
					require.True(t, cp.HasHeld())
					held := tc.held
					if held == nil {
						held = tc.want
					}
					assert.Equal(t, held, types(strs(cp.Pending.Items)), "the held record Python's exit leaves: no withdrawn output, its call until the entry settle")
					if viaJSON {
						cp = roundTrip(t, cp)
					}
					// The reattach: a new run with the session attached
					// settles the batch at entry.
					s := newFake(t, "s1")
					_, err := cp.Resume(ctx, s)
					require.NoError(t, err)
					assert.Equal(t, tc.want, types(s.all(t)))
					assert.Nil(t, cp.Pending)
				})
			}
		})
	}
}

func TestHoldResumedTurn(t *testing.T) {
	t.Run("without a held record it does nothing", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		require.NoError(t, cp.HoldResumedTurn(items(output("c1"))))
		assert.Nil(t, cp.Pending)
	})
	t.Run("it folds the view like ExtendHeld", func(t *testing.T) {
		cp := resumedTurn(t, filterCase{parked: items(call("c1"))}, nil)
		require.NoError(t, cp.HoldResumedTurn(items(output("c1"), assistant("after"))))
		require.True(t, cp.HasHeld())
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1", "role=assistant"}, types(strs(cp.Pending.Items)))
		assert.Nil(t, cp.Pending.Before)
	})
	t.Run("a batch whose every output is withdrawn keeps its calls for the entry settle", func(t *testing.T) {
		cp := resumedTurn(t, filterCase{parked: items(call("c1")), folded: items(output("c1"))}, nil)
		require.NoError(t, cp.HoldResumedTurn(items(user("unrelated"))))
		require.True(t, cp.HasHeld(), "the view itself is folded")
		assert.Equal(t, []string{"function_call:c1", "role=user"}, types(strs(cp.Pending.Items)))
		cp.SetStep(runstate.StepRunAgain)
		s := newFake(t, "s1")
		_, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, []string{"role=user"}, types(s.all(t)), "the entry settle drops the unpaired call")
	})
	t.Run("a session for another id is refused only at the reattach", func(t *testing.T) {
		cp := resumedTurn(t, filterCase{parked: items(call("c1")), folded: items(output("c1"))}, nil)
		require.NoError(t, cp.HoldResumedTurn(items(output("c1"))))
		_, err := cp.Resume(ctx, newFake(t, "other"))
		require.ErrorIs(t, err, runstate.ErrWrongSession)
		assert.True(t, cp.HasHeld(), "the batch is kept")
	})
}
