package heldwrite

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The held-write scenarios: semantics §5.1 (tests/test_deferred_interrupted_session_write.py).

func init() {
	registerScenarios(
		scenario{"deferred-park-run-again", "§5.1.1", scDeferredRunAgain},
		scenario{"deferral-survives-behavior-change", "§5.1.2", scBehaviorChange},
		scenario{"non-deferred-park-written-once", "§5.1.3", scNonDeferred},
		scenario{"partial-approval-one-batch", "§5.1.4", scPartialApproval},
		scenario{"held-final-output/guarded", "§5.1.5", func(x *sc) { scHeldFinal(x, guardPass) }},
		scenario{"held-final-output/unguarded", "§5.1.5", func(x *sc) { scHeldFinal(x, guardNone) }},
		scenario{"detached-resume-no-rewrite", "§5.1.6", scDetachedNoRewrite},
		scenario{"emptied-turn-settles-pair", "§5.1.7", scEmptiedTurn},
		scenario{"filter-drop-takes-call", "§5.1.8", scFilterDropsOne},
		scenario{"held-other-session-refused", "§5.1.9", scHeldOtherSession},
		scenario{"context-aware-session", "§5.1.10", scContextAware},
		scenario{"session-without-latest", "§5.1.11", scWithoutLatest},
		scenario{"after-turn-cancel-reattach", "§5.1.12", scAfterTurnCancel},
		scenario{"reject-persists-rejection", "§5.1.13", scReject},
		scenario{"held-rides-result-checkpoint", "§5.1.14,44,49", scHeldRidesResult},
		scenario{"one-ordered-write", "§5.1.15", scOneOrderedWrite},
		scenario{"tripwire-sanitized-pair", "§5.1.16", scTripwire},
		scenario{"guardrail-crash-persists-pair", "§5.1.17", scGuardrailCrash},
		scenario{"failed-held-settle-recovered", "§5.1.18", scFailedHeldSettle},
		scenario{"detached-park-joins-held", "§5.1.19", scDetachedParkJoins},
		scenario{"gate-off-reinterruption-keeps-pending", "§5.1.20", scGateOffReinterruption},
		scenario{"entry-settle-after-filtered-detached", "§5.1.21", scEntrySettleFiltered},
		scenario{"detached-completion-clears-held", "§5.1.22", scDetachedCompletion},
		scenario{"failed-final-settle-fails-closed", "§5.1.23", scFailedFinalSettle},
		scenario{"failed-guarded-final-settle-fails-closed", "§5.1.24", scFailedGuardedFinalSettle},
		scenario{"guarded-final-preamble-once", "§5.1.26", scPreambleOnce},
		scenario{"settled-held-counts", "§5.1.29,40", scSettledHeldCounts},
		scenario{"settled-count-matches-append", "§5.1.32", scSettledCountMatches},
		scenario{"failed-detached-completion-keeps-held", "§5.1.34", scFailedDetachedCompletion},
		scenario{"entry-settle-compaction", "§5.1.43,50", scEntrySettleCompaction},
		scenario{"rejected-max-turns-output-keeps-held", "§5.1.45", func(x *sc) { scMaxTurns(x, false) }},
		scenario{"max-turns-completion-clears-held", "§5.1.46,48", func(x *sc) { scMaxTurns(x, true) }},
	)
}

// The scenarios' tools and items.
var (
	scTools = map[string]toolSpec{
		"look_up":            {},
		"write_thing":        {approval: true},
		"write_other":        {approval: true},
		"charge":             {approval: true},
		"notify":             {approval: true},
		"transfer_to_target": {handoff: true},
	}

	uDo      = userItem("do the thing")
	cLookup  = call("call_LOOKUP", "look_up")
	oLookup  = executed("call_LOOKUP", "look_up")
	cParked  = call("call_PARKED", "write_thing")
	oParked  = executed("call_PARKED", "write_thing")
	cParked2 = call("call_PARKED_2", "write_other")
	oParked2 = executed("call_PARKED_2", "write_other")
	cHandoff = callItem("call_HANDOFF", "transfer_to_target", "{}")
	oHandoff = outputItem("call_HANDOFF", `{"assistant":"target"}`)
	mDone    = assistantItem("done")
	preamble = assistantItem("About to write the thing.")
)

const (
	idParked  = "call_PARKED"
	idParked2 = "call_PARKED_2"
	idLookup  = "call_LOOKUP"
)

func items(its ...session.Item) []session.Item { return its }

func resp(id string, its ...session.Item) response { return response{id: id, items: its} }

// deferring is the agent whose interrupted turns are withheld: output
// guardrails and a non-default tool-use behaviour; write_thing is not a
// stop tool, so an approval resumes into run-again.
func deferring() agentCfg {
	return agentCfg{guard: guardPass, behavior: behaviorStopAt, stopAt: []string{"finish"}}
}

// defaultBehavior has the default tool-use behaviour, so nothing is withheld.
func defaultBehavior(g guard) agentCfg { return agentCfg{guard: g, behavior: behaviorRunAgain} }

// terminal stops at write_thing: the approval resume ends in a final output.
func terminal(g guard) agentCfg {
	return agentCfg{guard: g, behavior: behaviorStopAt, stopAt: []string{"write_thing"}}
}

// A gated write on the second model turn, so the resumed boundary has a prefix.
func deferringModel() []response {
	return []response{resp("resp_1", cLookup), resp("resp_2", cParked), resp("resp_3", mDone)}
}

// One response carrying two approval-required calls.
func multiModel() []response {
	return []response{resp("resp_1", cParked, cParked2), resp("resp_2", mDone)}
}

func terminalModel(withPreamble bool) []response {
	parked := resp("resp_2", cParked)
	if withPreamble {
		parked = resp("resp_2", preamble, cParked)
	}
	return []response{resp("resp_1", cLookup), parked}
}

func approve(ids ...string) []string { return ids }

// park runs a fresh run that must stop on the given pending calls.
func (x *sc) park(w *world, a agentCfg, s session.Session, pending ...string) runOut {
	x.Helper()
	out := x.step(w, runIn{agent: a, s: s, input: items(uDo)})
	require.NoError(x, out.err, "the fresh run")
	require.Equal(x, pending, out.pending, "the fresh run parks on its approvals")
	return out
}

// finished asserts a run that produced final.
func (x *sc) finished(out runOut, final string) {
	x.Helper()
	require.NoError(x, out.err)
	require.True(x, out.done, "the run must finish")
	require.Equal(x, final, out.final)
	requireNoRecord(x, out.cp, "the live checkpoint")
	requireNoRecord(x, out.snapshot, "the result checkpoint")
}

func (x *sc) history(s session.Session, want []session.Item, msgAndArgs ...any) {
	x.Helper()
	requireHistory(x, x.Context(), s, want, msgAndArgs...)
}

// approveParked is the common park → approve → run-again path on s.
func (x *sc) approveParked(a, resumeAgent agentCfg, s session.Session) *world {
	x.Helper()
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, a, s, idParked)
	out = x.step(w, runIn{agent: resumeAgent, s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
	return w
}

func scDeferredRunAgain(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	x.history(s, items(uDo, cLookup, oLookup), "a deferred park writes nothing of the parked response")
	requireHeld(x, out.cp, items(cParked), "after the park")
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scBehaviorChange(x *sc) {
	// The deferral decision is the checkpoint's: resuming with the default
	// behaviour still settles the parked batch.
	x.approveParked(deferring(), defaultBehavior(guardPass), x.Fresh("s"))
}

func scNonDeferred(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, defaultBehavior(guardPass), s, idParked)
	x.history(s, items(uDo, cLookup, oLookup, cParked), "a non-deferred park writes the call now")
	require.Nil(x, out.cp.Pending, "a non-deferred park registers nothing")
	require.Equal(x, 1, out.cp.PersistedCount, "the parked call counts as persisted")
	out = x.step(w, runIn{agent: defaultBehavior(guardPass), s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone), "the parked call is written once")
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scPartialApproval(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, multiModel()...)
	out := x.park(w, deferring(), s, idParked, idParked2)
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked)})
	require.NoError(x, out.err)
	require.Equal(x, []string{idParked2}, out.pending)
	x.history(s, items(uDo), "the re-park writes nothing")
	requireHeld(x, out.snapshot, items(cParked, cParked2, oParked), "the re-park keeps one canonical batch")
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked2)})
	x.finished(out, "done")
	x.history(s, items(uDo, cParked, cParked2, oParked, oParked2, mDone))
	requireRuns(x, w, map[string]int{idParked: 1, idParked2: 1})
}

func scHeldFinal(x *sc, resumeGuard guard) {
	// A resume may run without the guardrails the park had; the final-output
	// exit lands the held batch either way.
	s := x.Fresh("s")
	w := newWorld(scTools, terminalModel(false)...)
	out := x.park(w, terminal(guardPass), s, idParked)
	out = x.step(w, runIn{agent: terminal(resumeGuard), s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "write_thing:call_PARKED")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scDetachedNoRewrite(x *sc) {
	// A non-deferred park persists the calls; a detached resume zeroes the
	// count (the gate rule); the reattached resume must not rewrite them.
	// The first call's output was produced detached, where nothing is
	// persisted, so only the second pair's output reaches the Session.
	s := x.Fresh("s")
	w := newWorld(scTools, multiModel()...)
	out := x.park(w, defaultBehavior(guardPass), s, idParked, idParked2)
	x.history(s, items(uDo, cParked, cParked2))
	out = x.step(w, runIn{agent: deferring(), cp: out.cp, approve: approve(idParked)})
	require.NoError(x, out.err)
	require.Equal(x, []string{idParked2}, out.pending)
	require.Equal(x, 0, out.cp.PersistedCount, "a detached gated resume zeroes the count")
	require.Nil(x, out.cp.Pending, "a detached park without a standing record registers nothing")
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked2)})
	x.finished(out, "done")
	x.history(s, items(uDo, cParked, cParked2, oParked2, mDone), "nothing rewritten")
	requireRuns(x, w, map[string]int{idParked: 1, idParked2: 1})
}

func emptyAll([]session.Item) []session.Item { return nil }

func dropParked2Output(its []session.Item) []session.Item {
	var out []session.Item
	for _, it := range its {
		if it.Type() == "function_call_output" && it.CallID() == idParked2 {
			continue
		}
		out = append(out, it)
	}
	return out
}

func scEmptiedTurn(x *sc) {
	// A handoff filter empties the resolved turn; the approved tool ran and
	// its output was folded into the held batch, so the executed pair
	// settles and only the unpaired handoff call drops.
	s := x.Fresh("s")
	a := deferring()
	a.filter = emptyAll
	w := newWorld(scTools, resp("resp_1", cParked, cHandoff), resp("resp_2", mDone))
	out := x.park(w, a, s, idParked)
	out = x.step(w, runIn{agent: a, s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cParked, oParked, mDone), "the executed pair survives the emptied turn")
	requireRuns(x, w, map[string]int{idParked: 1})
}

func scFilterDropsOne(x *sc) {
	// Pairing is per call: the output the filter removed takes its held call
	// with it, the rest settles.
	s := x.Fresh("s")
	a := deferring()
	a.filter = dropParked2Output
	w := newWorld(scTools, resp("resp_1", cParked, cParked2, cHandoff), resp("resp_2", mDone))
	out := x.park(w, a, s, idParked, idParked2)
	out = x.step(w, runIn{agent: a, s: s, cp: out.cp, approve: approve(idParked, idParked2)})
	x.finished(out, "done")
	x.history(s, items(uDo, cParked, cHandoff, oParked, oHandoff, mDone))
	requireRuns(x, w, map[string]int{idParked: 1, idParked2: 1})
}

func scHeldOtherSession(x *sc) {
	s := x.Fresh("s")
	other := x.Fresh("other")
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	res := x.step(w, runIn{agent: deferring(), s: other, cp: out.cp, approve: approve(idParked)})
	require.ErrorIs(x, res.err, runstate.ErrWrongSession)
	x.history(other, nil, "nothing is written to the other session")
	x.history(s, items(uDo, cLookup, oLookup), "nor to the original one")
	requireRuns(x, w, map[string]int{idLookup: 1})
	require.Equal(x, 2, w.modelCalls(), "no model call")
	requireHeld(x, res.cp, items(cParked), "the record rides on")
}

func scContextAware(x *sc) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	fs.rcAware = true
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked)})
	require.Positive(x, fs.calls)
	require.Zero(x, fs.wrapperless(), "every session call of the loop carries the run context")
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
}

func scWithoutLatest(x *sc) {
	s, _ := wrapFaults(x.Fresh("s"), false)
	_, isLatest := s.(session.LatestReader)
	require.False(x, isLatest)
	x.approveParked(deferring(), deferring(), s)
}

func scAfterTurnCancel(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	out = x.step(w, runIn{agent: deferring(), cp: out.cp, approve: approve(idParked), cancelAfterTurn: true})
	require.NoError(x, out.err)
	require.Equal(x, runstate.StepRunAgain, out.cp.Step.Kind)
	requireHeld(x, out.snapshot, items(cParked, oParked), "the detached carry")
	x.history(s, items(uDo, cLookup, oLookup))
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scReject(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, reject: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, outputItem(idParked, rejectionText), mDone))
	requireRuns(x, w, map[string]int{idLookup: 1})
}

func scHeldRidesResult(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, deferringModel()...)
	a := deferring()
	stored := true
	a.store = &stored
	out := x.park(w, a, s, idParked)
	b, err := json.Marshal(out.snapshot)
	require.NoError(x, err)
	var doc struct {
		Pending map[string]json.RawMessage `json:"pending_session_write"`
	}
	require.NoError(x, json.Unmarshal(b, &doc))
	p := doc.Pending
	require.NotNil(x, p, "the result checkpoint carries the held record: %s", b)
	require.JSONEq(x, `true`, string(p["held"]))
	require.JSONEq(x, `null`, string(p["before"]))
	require.JSONEq(x, `"resp_2"`, string(p["response_id"]), "the park records the response the batch belongs to")
	require.JSONEq(x, `true`, string(p["store"]), "the park records the store the response was produced under")
	require.JSONEq(x, `1`, string(p["persisted_count"]))
	var batch []session.Item
	require.NoError(x, json.Unmarshal(p["items"], &batch))
	x.RequireItems(items(cParked), batch, "the batch carries only the withheld response, never the input")
	// And it completes cleanly.
	out = x.step(w, runIn{agent: a, s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
}

func scOneOrderedWrite(x *sc) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	mark := len(fs.committed())
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	var settling [][]session.Item
	for _, b := range fs.committed()[mark:] {
		for _, it := range b {
			if it.CallID() == idParked {
				settling = append(settling, b)
				break
			}
		}
	}
	require.Len(x, settling, 1, "exactly one append carries the parked pair")
	x.RequireItems(items(cParked, oParked), settling[0], "call before output, in one ordered write")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
}

func scTripwire(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, terminalModel(true)...)
	out := x.park(w, terminal(guardPass), s, idParked)
	requireHeld(x, out.cp, items(preamble, cParked), "the park withholds the preamble and the call")
	out = x.step(w, runIn{agent: terminal(guardTrip), s: s, cp: out.cp, approve: approve(idParked)})
	require.ErrorIs(x, out.err, errTripwire)
	requireNoRecord(x, out.cp, "the live checkpoint")
	requireNoRecord(x, out.snapshot, "the result checkpoint")
	x.history(s, items(uDo, cLookup, oLookup, callItem(idParked, "write_thing", "{}"), outputItem(idParked, withheldText)),
		"only the sanitised pair is stored; the preamble is not resurrected")
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scGuardrailCrash(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, terminalModel(false)...)
	out := x.park(w, terminal(guardPass), s, idParked)
	out = x.step(w, runIn{agent: terminal(guardCrash), s: s, cp: out.cp, approve: approve(idParked)})
	require.ErrorIs(x, out.err, errGuardrailCrash)
	requireNoRecord(x, out.cp, "the crash-path save claims the batch")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scFailedHeldSettle(x *sc) {
	for _, kind := range []faultKind{faultFailBeforeCommit, faultLoseAck} {
		s, fs := wrapFaults(x.Fresh(string(kind)), true)
		w := newWorld(scTools, deferringModel()...)
		out := x.park(w, deferring(), s, idParked)
		fs.arm(nil, fault{opAppend, 1, kind})
		out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked)})
		fs.disarm()
		require.ErrorIs(x, out.err, errInjected, "%s: the session's error propagates", kind)
		requireOrdinary(x, out.cp, items(cParked, oParked), string(kind)+": the settle registered the batch")
		require.Equal(x, 2, w.modelCalls(), "%s: no model call before the settle", kind)
		out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp})
		x.finished(out, "done")
		x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone), "%s", kind)
		requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
	}
}

func scDetachedParkJoins(x *sc) {
	// A detached resume resolves the first approval and parks a second call
	// on the next turn: the new call joins the held batch.
	s := x.Fresh("s")
	cA, oA := call("call_A", "write_thing"), executed("call_A", "write_thing")
	cB, oB := call("call_B", "write_other"), executed("call_B", "write_other")
	w := newWorld(scTools, resp("resp_1", cA), resp("resp_2", cB), resp("resp_3", mDone))
	out := x.park(w, deferring(), s, "call_A")
	out = x.step(w, runIn{agent: deferring(), cp: out.cp, approve: approve("call_A")})
	require.NoError(x, out.err)
	require.Equal(x, []string{"call_B"}, out.pending)
	requireHeld(x, out.snapshot, items(cA, oA, cB), "the detached park joins the standing batch")
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve("call_B")})
	x.finished(out, "done")
	x.history(s, items(uDo, cA, oA, cB, oB, mDone))
	requireRuns(x, w, map[string]int{"call_A": 1, "call_B": 1})
}

func scGateOffReinterruption(x *sc) {
	// Approving one of two held calls with the gate off settles the batch on
	// the re-interruption; the still-pending call settles unpaired.
	s := x.Fresh("s")
	w := newWorld(scTools, multiModel()...)
	out := x.park(w, deferring(), s, idParked, idParked2)
	resume := defaultBehavior(guardPass)
	out = x.step(w, runIn{agent: resume, s: s, cp: out.cp, approve: approve(idParked)})
	require.NoError(x, out.err)
	require.Equal(x, []string{idParked2}, out.pending)
	x.history(s, items(uDo, cParked, cParked2, oParked), "the pending call settles unpaired")
	require.Nil(x, out.cp.Pending)
	out = x.step(w, runIn{agent: resume, s: s, cp: out.cp, approve: approve(idParked2)})
	x.finished(out, "done")
	x.history(s, items(uDo, cParked, cParked2, oParked, oParked2, mDone))
	requireRuns(x, w, map[string]int{idParked: 1, idParked2: 1})
}

func scEntrySettleFiltered(x *sc) {
	// A detached resume of the partial-filter handoff folds the batch and
	// applies the filter's view at its exit, an after-turn cancel leaves
	// run-again, and the reattach settles at entry: the output the filter
	// removed stays out and takes its call with it, as attached
	// (filter-drop-takes-call).
	s := x.Fresh("s")
	a := deferring()
	a.filter = dropParked2Output
	w := newWorld(scTools, resp("resp_1", cParked, cParked2, cHandoff), resp("resp_2", mDone))
	out := x.park(w, a, s, idParked, idParked2)
	out = x.step(w, runIn{agent: a, cp: out.cp, approve: approve(idParked, idParked2), cancelAfterTurn: true})
	require.NoError(x, out.err)
	require.Equal(x, runstate.StepRunAgain, out.cp.Step.Kind)
	out = x.step(w, runIn{agent: a, s: s, cp: out.cp})
	x.finished(out, "done")
	x.history(s, items(uDo, cParked, cHandoff, oParked, oHandoff, mDone))
	requireRuns(x, w, map[string]int{idParked: 1, idParked2: 1})
}

func scDetachedCompletion(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, deferringModel()...)
	out := x.park(w, deferring(), s, idParked)
	out = x.step(w, runIn{agent: deferring(), cp: out.cp, approve: approve(idParked)})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup), "a detached run writes nothing")
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scFailedDetachedCompletion(x *sc) {
	// The batch is discarded only once the detached run has ended; a
	// failing guardrail keeps it, and the reattach lands it.
	s := x.Fresh("s")
	w := newWorld(scTools, append(deferringModel(), resp("resp_4", mDone))...)
	out := x.park(w, deferring(), s, idParked)
	a := deferring()
	a.guard = guardCrash
	out = x.step(w, runIn{agent: a, cp: out.cp, approve: approve(idParked)})
	require.ErrorIs(x, out.err, errGuardrailCrash)
	requireHeld(x, out.cp, items(cParked, oParked), "a failed detached completion keeps the batch")
	x.history(s, items(uDo, cLookup, oLookup))
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp})
	x.finished(out, "done")
	x.history(s, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

// failClosed asserts a checkpoint whose run ended mid-settle of a final
// output: the record is kept, and its JSON is refused on load.
func failClosed(x *sc, cp *runstate.Checkpoint, batch []session.Item) {
	x.Helper()
	requireOrdinary(x, cp, batch, "the failed final settle keeps the batch recorded")
	b, err := json.Marshal(cp)
	require.NoError(x, err)
	// Fail closed: the checkpoint is written terminal with the batch it
	// died settling, so it loads (for inspection and repair) and never
	// resumes.
	back, err := runstate.Load(b)
	require.NoError(x, err, "a mid-settle final checkpoint is one Load reads back")
	require.True(x, back.Terminal, "a mid-settle final checkpoint is terminal")
	requireOrdinary(x, back, batch, "the terminal checkpoint keeps the batch recorded")
	_, err = back.Resume(context.Background(), nil)
	require.ErrorIs(x, err, runstate.ErrTerminal, "a mid-settle final checkpoint never resumes")
}

func scFailedFinalSettle(x *sc) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, terminalModel(false)...)
	out := x.park(w, terminal(guardPass), s, idParked)
	fs.arm(nil, fault{opAppend, 1, faultFailBeforeCommit})
	out = x.step2(w, runIn{agent: terminal(guardNone), s: s, cp: out.cp, approve: approve(idParked)})
	fs.disarm()
	require.ErrorIs(x, out.err, errInjected)
	failClosed(x, out.cp, items(cParked, oParked))
	x.history(s, items(uDo, cLookup, oLookup))
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1})
}

func scFailedGuardedFinalSettle(x *sc) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, terminalModel(true)...)
	out := x.park(w, terminal(guardPass), s, idParked)
	fs.arm(nil, fault{opAppend, 1, faultFailBeforeCommit})
	out = x.step2(w, runIn{agent: terminal(guardPass), s: s, cp: out.cp, approve: approve(idParked)})
	fs.disarm()
	require.ErrorIs(x, out.err, errInjected)
	failClosed(x, out.cp, items(preamble, cParked, oParked))
	x.history(s, items(uDo, cLookup, oLookup))
}

// step2 runs a step whose checkpoint is not carried (it may not load).
func (x *sc) step2(w *world, in runIn) runOut { return w.run(x.Context(), in) }

func scPreambleOnce(x *sc) {
	s := x.Fresh("s")
	w := newWorld(scTools, terminalModel(true)...)
	out := x.park(w, terminal(guardPass), s, idParked)
	out = x.step(w, runIn{agent: terminal(guardPass), s: s, cp: out.cp, approve: approve(idParked)})
	x.finished(out, "write_thing:call_PARKED")
	x.history(s, items(uDo, cLookup, oLookup, preamble, cParked, oParked), "the preamble lands once")
}

func scSettledHeldCounts(x *sc) {
	// Direct: a held batch settling with no resolved items counts.
	s0 := x.Fresh("direct")
	cp := runstate.New()
	cp.SetStep(runstate.StepRunAgain)
	cp = x.carry(cp)
	_, err := cp.SaveResumedTurn(x.Context(), s0, runstate.ResumedTurn{Held: items(cParked, oParked)})
	require.NoError(x, err)
	n := cp.PersistedCount
	require.Equal(x, 2, n, "settled held items count toward the turn's persisted count")
	require.Equal(x, 2, cp.PersistedCount)
	x.history(s0, items(cParked, oParked))

	// Through the loop (§5.1.40): a gate-off partial settle, then a resume
	// with the gate back on fails fast instead of re-appending.
	s := x.Fresh("s")
	w := newWorld(scTools, multiModel()...)
	out := x.park(w, deferring(), s, idParked, idParked2)
	out = x.step(w, runIn{agent: terminal(guardNone), s: s, cp: out.cp, approve: approve(idParked)})
	require.NoError(x, out.err)
	require.Equal(x, []string{idParked2}, out.pending)
	require.Equal(x, 3, out.cp.PersistedCount, "the settled call pair and the pending call count")
	out = x.step(w, runIn{agent: deferring(), s: s, cp: out.cp, approve: approve(idParked2)})
	require.ErrorIs(x, out.err, runstate.ErrPersistedBeforeGate)
	x.history(s, items(uDo, cParked, cParked2, oParked), "nothing re-appended")
	requireRuns(x, w, map[string]int{idParked: 1})
	require.Equal(x, 1, w.modelCalls())
}

func scSettledCountMatches(x *sc) {
	// The resolved turn re-delivers the output the batch folded: it dedups
	// away, and the count is what the append wrote.
	s := x.Fresh("s")
	cp := runstate.New()
	cp.SetStep(runstate.StepRunAgain) // the exit of a resumed turn that runs the model again
	cp = x.carry(cp)
	res, err := cp.SaveResumedTurn(x.Context(), s, runstate.ResumedTurn{Items: items(oParked), Held: items(cParked, oParked)})
	require.NoError(x, err)
	n := cp.PersistedCount
	got := x.All(s)
	require.Equal(x, len(got), n)
	require.Equal(x, len(got), res.Count)
	x.history(s, items(cParked, oParked))
}

func scEntrySettleCompaction(x *sc) {
	rec := newCompactionRecorder(x.Fresh("s"))
	w := newWorld(scTools, deferringModel()...)
	a := deferring()
	stored := true
	a.store = &stored
	out := x.park(w, a, rec, idParked)
	out = x.step(w, runIn{agent: a, cp: out.cp, approve: approve(idParked), cancelAfterTurn: true})
	require.NoError(x, out.err)
	mark := len(rec.log())
	out = x.step(w, runIn{agent: a, s: rec, cp: out.cp})
	x.finished(out, "done")
	log := rec.log()[mark:]
	require.NotEmpty(x, log)
	require.Equal(x, compactionEntry{deferred: "resp_2", store: "true"}, log[0],
		"the entry settle defers compaction for the parked response with its recorded store")
	x.history(rec, items(uDo, cLookup, oLookup, cParked, oParked, mDone))
}

var errHandlerOutput = errors.New("scenario: max-turns handler output failed validation")

func scMaxTurns(x *sc, valid bool) {
	// A detached resume runs out of turns; the handler's output ends the run
	// and only then discards the held batch.
	s := x.Fresh("s")
	w := newWorld(scTools, resp("resp_1", cLookup), resp("resp_2", cParked),
		resp("resp_3", call("call_L0", "look_up")), resp("resp_4", call("call_L1", "look_up")))
	out := x.park(w, deferring(), s, idParked)
	a := deferring()
	a.maxCalls = 1
	a.onMaxTurns = func() (string, error) {
		if !valid {
			return "", errHandlerOutput
		}
		return "stopped at max turns", nil
	}
	out = x.step(w, runIn{agent: a, cp: out.cp, approve: approve(idParked)})
	if valid {
		x.finished(out, "stopped at max turns")
	} else {
		require.ErrorIs(x, out.err, errHandlerOutput)
		requireHeld(x, out.cp, items(cParked, oParked), "a rejected handler output keeps the batch")
	}
	requireRuns(x, w, map[string]int{idLookup: 1, idParked: 1, "call_L0": 1})
	x.history(s, items(uDo, cLookup, oLookup))
}
