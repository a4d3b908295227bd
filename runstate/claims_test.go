package runstate_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cases issue 34 saw on 7b77d4f, on the memory store and SQLite, with
// the output-guardrail gate on and off. Each was red there.

func claimBackends(t *testing.T) []struct {
	name string
	open func(id string) session.CheckpointStore
} {
	t.Helper()
	mem := memory.New(memory.Options{})
	lite, err := sqlite.OpenFile(context.Background(), filepath.Join(t.TempDir(), "claims.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lite.Close() })
	return []struct {
		name string
		open func(id string) session.CheckpointStore
	}{
		{"memory", func(id string) session.CheckpointStore { return must1(mem.Session(id)) }},
		{"sqlite", func(id string) session.CheckpointStore { return must1(lite.Session(id)) }},
	}
}

var gates = []struct {
	name string
	opts runstate.Options
}{
	{"gate on", runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}},
	{"gate off", runstate.Options{}},
}

// forEach runs f on each backend and gate, with a new session each.
func forEach(t *testing.T, f func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options)) {
	for _, b := range claimBackends(t) {
		for _, g := range gates {
			t.Run(b.name+"/"+g.name, func(t *testing.T) {
				id := t.Name()
				f(t, func() session.CheckpointStore { return b.open(id) }, g.opts)
			})
		}
	}
}

func toolCall(id string) session.Item {
	return session.MustItem(`{"type":"function_call","call_id":"` + id + `","name":"delete_file","arguments":"{}"}`)
}

func toolOutput(id, out string) session.Item {
	return session.MustItem(`{"type":"function_call_output","call_id":"` + id + `","output":"` + out + `"}`)
}

// parked opens a run, gives it input and parks c1 for approval.
func parked(t *testing.T, s session.Session, opts runstate.Options) {
	t.Helper()
	r, err := runstate.Open(ctx, s, opts)
	require.NoError(t, err)
	require.NoError(t, r.Input(ctx, user("delete a.txt")))
	require.NoError(t, r.Interrupt(ctx, "resp_1", items(toolCall("c1")), "c1"))
}

func severe(items []session.Item) []history.Problem {
	var out []history.Problem
	for _, p := range history.Diagnose(items) {
		if p.Kind.Severe() {
			out = append(out, p)
		}
	}
	return out
}

func TestTwoApproversOneToolRun(t *testing.T) {
	for _, b := range claimBackends(t) {
		for _, g := range gates {
			t.Run(b.name+"/"+g.name, func(t *testing.T) {
				for try := range 15 {
					id := fmt.Sprintf("%s/%d", t.Name(), try)
					parked(t, b.open(id), g.opts)
					var ran atomic.Int32
					var wg sync.WaitGroup
					errs := make([]error, 2)
					for i := range errs {
						wg.Go(func() {
							r, err := runstate.Open(ctx, b.open(id), g.opts)
							if err == nil {
								err = r.Claim(ctx, "c1")
							}
							if err != nil {
								errs[i] = err
								return
							}
							ran.Add(1) // the tool's side effect
							errs[i] = r.Output(ctx, toolOutput("c1", "deleted"))
						})
					}
					wg.Wait()
					require.Equal(t, int32(1), ran.Load(), "try %d: the tool ran once", try)
					lost := 0
					for _, err := range errs {
						if err != nil {
							// Both loaded the parked state: a conflict. One
							// opened after the other's claim or output: it
							// sees the call in doubt or answered.
							if !errors.Is(err, runstate.ErrInDoubt) && !errors.Is(err, runstate.ErrNotAwaiting) {
								require.ErrorIs(t, err, session.ErrCheckpointConflict)
							}
							lost++
						}
					}
					require.Equal(t, 1, lost, "try %d: exactly one claim lost", try)
				}
			})
		}
	}
}

func TestClaimedCallIsInDoubtAfterACrash(t *testing.T) {
	forEach(t, func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options) {
		parked(t, open(), opts)
		a := must1(runstate.Open(ctx, open(), opts))
		assert.Equal(t, runstate.Next{Kind: runstate.NextApproval, CallIDs: []string{"c1"}}, a.Next())
		require.NoError(t, a.Claim(ctx, "c1"))
		require.NoError(t, a.Claim(ctx, "c1"), "claiming one's own call again is no error")
		assert.Equal(t, runstate.Next{Kind: runstate.NextOutput, CallIDs: []string{"c1"}}, a.Next())
		assert.Empty(t, a.Awaiting())
		// The process dies inside the tool.

		b := must1(runstate.Open(ctx, open(), opts))
		assert.Empty(t, b.Awaiting(), "a claimed call is never offered as awaiting again")
		assert.Equal(t, []string{"c1"}, b.InDoubt())
		assert.Equal(t, runstate.Next{Kind: runstate.NextResolve, CallIDs: []string{"c1"}}, b.Next())
		var doubt *runstate.InDoubtError
		require.ErrorAs(t, b.Claim(ctx, "c1"), &doubt)
		assert.Equal(t, []string{"c1"}, doubt.CallIDs)
		require.Len(t, doubt.Claims, 1)
		assert.NotEmpty(t, doubt.Claims[0].By)
		require.ErrorIs(t, b.Settle(ctx), runstate.ErrInDoubt)
		require.ErrorIs(t, b.Finish(ctx, "resp_2", assistant("done")), runstate.ErrInDoubt)
		require.ErrorIs(t, b.Turn(ctx, "resp_2", assistant("x")), runstate.ErrInDoubt)
		cs := b.Checkpoint().Claims()
		require.Len(t, cs, 1)
		assert.Equal(t, "c1", cs[0].CallID)

		t.Run("resolved by the output found", func(t *testing.T) {
			// Each resolution on its own copy of the in-doubt state.
			c := must1(runstate.Open(ctx, open(), opts))
			require.NoError(t, c.Output(ctx, toolOutput("c1", "found deleted")))
			require.NoError(t, c.Settle(ctx))
			assert.Equal(t, runstate.NextModel, c.Next().Kind)
			assert.Equal(t, "resp_1", c.Next().ResponseID)
			all := must1(session.All(ctx, open()))
			assert.Empty(t, severe(all))
			assert.Equal(t, toolOutput("c1", "found deleted").String(), all[len(all)-1].String())
			// The stale copy b lost.
			require.ErrorIs(t, b.Output(ctx, toolOutput("c1", "x")), session.ErrCheckpointConflict)
		})
	})
}

func TestReclaimAndAbandon(t *testing.T) {
	forEach(t, func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options) {
		parked(t, open(), opts)
		require.NoError(t, must1(runstate.Open(ctx, open(), opts)).Claim(ctx, "c1"))

		a := must1(runstate.Open(ctx, open(), opts))
		b := must1(runstate.Open(ctx, open(), opts))
		require.ErrorIs(t, a.Reclaim(ctx, "c2"), runstate.ErrNotInDoubt)
		require.NoError(t, a.Reclaim(ctx, "c1"))
		require.ErrorIs(t, b.Reclaim(ctx, "c1"), session.ErrCheckpointConflict, "one of two reclaimers wins")
		assert.Equal(t, runstate.NextOutput, a.Next().Kind)

		c := must1(runstate.Open(ctx, open(), opts))
		assert.Equal(t, []string{"c1"}, c.InDoubt(), "a reclaim is a claim: in doubt for the next process")
		require.NoError(t, c.Abandon(ctx, "c1", "outcome unknown"))
		require.NoError(t, c.Settle(ctx))
		all := must1(session.All(ctx, open()))
		assert.Empty(t, severe(all))
		assert.Equal(t, toolOutput("c1", "outcome unknown").String(), all[len(all)-1].String())
		require.Error(t, c.Abandon(ctx, "c1", "again"), "not claimed any more")
	})
}

func TestNoOrphanThroughTheFrontDoor(t *testing.T) {
	forEach(t, func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options) {
		s := open()
		r := must1(runstate.Open(ctx, s, opts))
		require.NoError(t, r.Input(ctx, user("hi")))
		before, _, err := s.LoadCheckpoint(ctx, runstate.DefaultName)
		require.NoError(t, err)
		var unknown *runstate.UnknownCallError
		require.ErrorAs(t, r.Interrupt(ctx, "resp_1", nil, "c1"), &unknown)
		assert.Equal(t, []string{"c1"}, unknown.CallIDs)
		require.ErrorIs(t, r.Interrupt(ctx, "resp_1", items(toolCall("c2")), "c2", "c9"), runstate.ErrUnknownCall)
		require.ErrorIs(t, r.Interrupt(ctx, "resp_1", items(toolCall("c3"), toolOutput("c3", "ok")), "c3"), runstate.ErrAlreadyAnswered)
		after, _, err := s.LoadCheckpoint(ctx, runstate.DefaultName)
		require.NoError(t, err)
		assert.Equal(t, before, after, "nothing written")
		require.ErrorIs(t, r.Output(ctx, toolOutput("c1", "x")), runstate.ErrNotAwaiting)
		require.NoError(t, r.Settle(ctx))
		all := must1(session.All(ctx, s))
		assert.Len(t, all, 1)
		assert.Empty(t, severe(all))

		// A call already in the session (an earlier turn's) may be awaited.
		require.NoError(t, r.Turn(ctx, "resp_0", toolCall("c4")))
		require.NoError(t, r.Interrupt(ctx, "resp_1", nil, "c4"))
		require.NoError(t, r.Output(ctx, toolOutput("c4", "ok")))
		require.NoError(t, r.Settle(ctx))
		assert.Empty(t, severe(must1(session.All(ctx, s))))
	})
}

func TestAnotherProcessTookOverIsOneError(t *testing.T) {
	forEach(t, func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options) {
		parked(t, open(), opts)
		a := must1(runstate.Open(ctx, open(), opts))
		b := must1(runstate.Open(ctx, open(), opts))
		require.NoError(t, a.Output(ctx, toolOutput("c1", "rejected")))
		require.ErrorIs(t, b.Output(ctx, toolOutput("c1", "rejected")), session.ErrCheckpointConflict)
		require.NoError(t, a.Settle(ctx))
		assert.Empty(t, severe(must1(session.All(ctx, open()))))
	})
}

func TestSettleNeverAppendsATurnTwice(t *testing.T) {
	forEach(t, func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options) {
		parked(t, open(), opts)
		a := must1(runstate.Open(ctx, open(), opts))
		require.NoError(t, a.Output(ctx, toolOutput("c1", "ok")))
		require.NoError(t, a.Settle(ctx, assistant("deleted a.txt")))
		n := len(must1(session.All(ctx, open())))

		b := must1(runstate.Open(ctx, open(), opts)) // skips Awaiting()
		require.ErrorIs(t, b.Settle(ctx, assistant("deleted a.txt")), runstate.ErrNothingToSettle)
		require.NoError(t, b.Settle(ctx), "nothing to settle and nothing given: no error")
		assert.Len(t, must1(session.All(ctx, open())), n, "nothing appended")
		assert.Equal(t, runstate.NextModel, b.Next().Kind)
	})
}

func TestOpenStoresNothingAndNextSaysWhatComes(t *testing.T) {
	forEach(t, func(t *testing.T, open func() session.CheckpointStore, opts runstate.Options) {
		s := open()
		r := must1(runstate.Open(ctx, s, opts))
		names := must1(s.ListCheckpoints(ctx))
		assert.Empty(t, names, "Open on a new run stores no checkpoint")
		assert.Equal(t, runstate.Next{Kind: runstate.NextInput}, r.Next())
		require.NoError(t, r.Input(ctx, user("hi")))
		assert.Equal(t, runstate.Next{Kind: runstate.NextModel}, r.Next())
		require.NoError(t, r.Turn(ctx, "resp_0", assistant("which file?")))
		assert.Equal(t, runstate.Next{Kind: runstate.NextModel, ResponseID: "resp_0"}, r.Next())
		require.NoError(t, r.Interrupt(ctx, "resp_1", items(toolCall("c1")), "c1"))

		// What a restart sees, at each step.
		next := func() runstate.Next {
			doc, _, err := s.LoadCheckpoint(ctx, runstate.DefaultName)
			if errors.Is(err, session.ErrNoCheckpoint) {
				return runstate.Next{Kind: runstate.NextInput}
			}
			require.NoError(t, err)
			return must1(runstate.Load(doc)).Next()
		}
		assert.Equal(t, runstate.Next{Kind: runstate.NextApproval, CallIDs: []string{"c1"}}, next())
		require.NoError(t, r.Output(ctx, toolOutput("c1", "ok")))
		assert.Equal(t, runstate.Next{Kind: runstate.NextSettle}, r.Next())
		assert.Equal(t, runstate.Next{Kind: runstate.NextSettle}, next())
		require.NoError(t, r.Settle(ctx))
		assert.Equal(t, runstate.Next{Kind: runstate.NextModel, ResponseID: "resp_1"}, next())
		require.NoError(t, r.Finish(ctx, "resp_2", assistant("done")))
		assert.Equal(t, runstate.Next{Kind: runstate.NextDone}, r.Next())
		assert.Equal(t, runstate.Next{Kind: runstate.NextInput}, next())
		assert.Empty(t, severe(must1(session.All(ctx, s))))
	})
}
