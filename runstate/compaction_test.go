package runstate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func newCompactor(t *testing.T, id string) *compactor {
	return &compactor{fakeSession: newFake(t, id)}
}

func TestCompactionBookkeeping(t *testing.T) {
	t.Run("the entry settle defers for the parked response with its store", func(t *testing.T) {
		for _, store := range []*bool{nil, ptr(false), ptr(true)} {
			s := newCompactor(t, "s1")
			cp := fresh(runstate.StepInterruption)
			require.NoError(t, cp.Park(s, items(call("c1"), output("c1")), runstate.ParkOptions{ResponseID: ptr("resp_parked"), Store: store}))
			cp = roundTrip(t, cp)
			cp.SetStep(runstate.StepRunAgain)
			res, err := cp.Resume(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, []string{"deferred:resp_parked:store=" + boolStr(store)}, s.log)
			assert.Equal(t, runstate.CompactionDeferred, res.Compaction.Kind)
			assert.Equal(t, 2, res.Count, "the count survives the deferral branch")
			assert.Equal(t, 2, cp.PersistedCount)
		}
	})
	t.Run("the 1.18 fixture defers for its recorded response", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_held_pending_session_write.json"))
		require.NoError(t, err)
		s := newCompactor(t, "session-118")
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, []string{"deferred:resp_held_1:store=None"}, s.log)
	})
	t.Run("the 1.19 fixture records no response: no bookkeeping", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_19_held_pending_session_write.json"))
		require.NoError(t, err)
		s := newCompactor(t, "session-118")
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Empty(t, s.log)
		assert.Len(t, s.all(t), 2)
	})
	t.Run("exit settles compact for the resume's response", func(t *testing.T) {
		s := newCompactor(t, "s1")
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(s, items(call("c1")), runstate.ParkOptions{ResponseID: ptr("resp_parked"), Store: ptr(false)}))
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		res, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(output("c1")), Held: held, ResponseID: "resp_resume", Store: ptr(true)})
		require.NoError(t, err)
		assert.Equal(t, []string{"deferred:resp_resume:store=True"}, s.log)
		assert.Equal(t, 2, res.Count)
	})
	t.Run("the deferral reads the settling batch, not the caller's input", func(t *testing.T) {
		// A settling batch's output defers even when the turn has none.
		s := newCompactor(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		_, err := cp.Save(ctx, s, runstate.Settling(runstate.SaveArgs{Input: items(call("c1"), output("c1")), NewItems: items(assistant("done")), ResponseID: "resp_1", Register: true}))
		require.NoError(t, err)
		assert.Equal(t, []string{"deferred:resp_1:store=None"}, s.log)
		// The caller's own older output in its input does not.
		s2 := newCompactor(t, "s2")
		cp2 := fresh(runstate.StepRunAgain)
		_, err = cp2.Save(ctx, s2, runstate.SaveArgs{Input: items(output("c0")), NewItems: items(assistant("done")), ResponseID: "resp_2"})
		require.NoError(t, err)
		assert.Equal(t, []string{"ran:resp_2:store=None:force=no"}, s2.log)
	})
	t.Run("a deferral forces the next compaction", func(t *testing.T) {
		s := newCompactor(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), ResponseID: "resp_1", Store: ptr(false)})
		require.NoError(t, err)
		res, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(assistant("done")), ResponseID: "resp_2", Store: ptr(false)})
		require.NoError(t, err)
		assert.Equal(t, []string{"deferred:resp_1:store=False", "ran:resp_2:store=False:force=yes"}, s.log)
		assert.True(t, res.Compaction.Force)
	})
	t.Run("MCP approval responses are local outputs", func(t *testing.T) {
		req := session.MustItem(`{"type":"mcp_approval_request","id":"mcpr_1","server_label":"s","name":"t","arguments":"{}"}`)
		resp := session.MustItem(`{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`)
		// A held pair settling.
		s := newCompactor(t, "s1")
		cp := fresh(runstate.StepInterruption)
		require.NoError(t, cp.Park(s, items(req), runstate.ParkOptions{}))
		held := cp.TakeHeld()
		cp.SetStep(runstate.StepRunAgain)
		_, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(resp), Held: held, ResponseID: "resp_2"})
		require.NoError(t, err)
		assert.Equal(t, []string{"deferred:resp_2:store=None"}, s.log)
		assert.Equal(t, []string{"mcp_approval_request:mcpr_1", "mcp_approval_response:mcpr_1"}, types(s.all(t)))
		// An ordinary one.
		s2 := newCompactor(t, "s2")
		_, err = fresh(runstate.StepRunAgain).Save(ctx, s2, runstate.SaveArgs{NewItems: items(resp), ResponseID: "resp_3"})
		require.NoError(t, err)
		assert.Equal(t, []string{"deferred:resp_3:store=None"}, s2.log)
	})
	t.Run("no response id or no compaction capability: nothing", func(t *testing.T) {
		s := newCompactor(t, "s1")
		res, err := fresh(runstate.StepRunAgain).Save(ctx, s, runstate.SaveArgs{NewItems: items(assistant("x"))})
		require.NoError(t, err)
		assert.Empty(t, s.log)
		assert.Equal(t, runstate.CompactionNone, res.Compaction.Kind)
		res, err = fresh(runstate.StepRunAgain).Save(ctx, newFake(t, "s2"), runstate.SaveArgs{NewItems: items(assistant("x")), ResponseID: "r"})
		require.NoError(t, err)
		assert.Equal(t, runstate.CompactionNone, res.Compaction.Kind)
	})
	t.Run("a compaction failure is reported after the append", func(t *testing.T) {
		s := newCompactor(t, "s1")
		s.failRun = errBackend
		cp := fresh(runstate.StepRunAgain)
		res, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: items(assistant("x")), ResponseID: "r"})
		n := cp.PersistedCount
		require.ErrorIs(t, err, errBackend)
		assert.Equal(t, 1, n)
		assert.Equal(t, 1, res.Count)
		assert.Nil(t, cp.Pending, "the append itself settled")
		assert.Len(t, s.all(t), 1)
	})
}

func TestMainLineCompactionRecord(t *testing.T) {
	t.Run("an acknowledged append replays compaction only", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_compaction_metadata.json"))
		require.NoError(t, err)
		s := newCompactor(t, "session-118")
		res, err := cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Empty(t, s.appends, "never re-appends")
		assert.Equal(t, []string{"deferred:resp_118:store=False"}, s.log)
		assert.Equal(t, runstate.CompactionDeferred, res.Compaction.Kind)
		assert.Nil(t, cp.Pending)
		assert.Equal(t, 2, cp.PersistedCount)
	})
	t.Run("a failing compaction keeps the acknowledged record", func(t *testing.T) {
		cp, err := runstate.Load(edit(t, "features/v1_18_compaction_metadata.json", func(d map[string]any) {
			d["pending_session_write"].(map[string]any)["has_local_tool_outputs"] = false
			d["pending_session_write"].(map[string]any)["append_acknowledged"] = false
			d["pending_session_write"].(map[string]any)["before"] = []any{}
		}))
		require.NoError(t, err)
		s := newCompactor(t, "session-118")
		s.failRun = errBackend
		_, err = cp.Resume(ctx, s)
		require.ErrorIs(t, err, errBackend)
		require.NotNil(t, cp.Pending)
		assert.Len(t, s.all(t), 2, "appended once")
		cp = roundTrip(t, cp)
		s.failRun = nil
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Len(t, s.all(t), 2, "the retry redoes compaction only")
		assert.Equal(t, []string{"ran:resp_118:store=False:force=no", "ran:resp_118:store=False:force=no"}, s.log)
		assert.Nil(t, cp.Pending)
	})
	t.Run("the acknowledged record still needs the original session", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_compaction_metadata.json"))
		require.NoError(t, err)
		_, err = cp.Resume(ctx, newCompactor(t, "other"))
		require.ErrorIs(t, err, runstate.ErrWrongSession)
	})
	t.Run("the pending-input record settles as an ordinary write", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_pending_input_session_write.json"))
		require.NoError(t, err)
		s := newFake(t, "compat-session")
		_, err = cp.Resume(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, []string{"role=user"}, types(s.all(t)))
		assert.Nil(t, cp.Pending)
	})
}

func TestCompactionRunContext(t *testing.T) {
	// RunCompaction gets the raw run context (usage accounting); the
	// deferral gets the gated one, absent for a session that does not accept
	// it on its history calls.
	s := newCompactor(t, "s1")
	rctx := session.WithRunContext(ctx, "run-ctx")
	cp := fresh(runstate.StepRunAgain)
	_, err := cp.Save(rctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), ResponseID: "r1"})
	require.NoError(t, err)
	_, err = cp.Save(rctx, s, runstate.SaveArgs{NewItems: items(assistant("x")), ResponseID: "r2"})
	require.NoError(t, err)
	assert.Equal(t, []string{"defer:no", "run:yes"}, s.rc)
}
