package heldwrite

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The ordinary pending-write scenarios: semantics §5.2 items 1 to 9
// (tests/test_run_impl_resume_paths.py).

func init() {
	registerScenarios(
		scenario{"resumed-append-recovered/" + string(faultFailBeforeCommit), "§5.2.1", func(x *sc) { scRecovered(x, faultFailBeforeCommit) }},
		scenario{"resumed-append-recovered/" + string(faultLoseAck), "§5.2.1", func(x *sc) { scRecovered(x, faultLoseAck) }},
		scenario{"ambiguous-recovery-refused/missing", "§5.2.2", func(x *sc) { scAmbiguous(x, "missing") }},
		scenario{"ambiguous-recovery-refused/different-id", "§5.2.2", func(x *sc) { scAmbiguous(x, "different-id") }},
		scenario{"ambiguous-recovery-refused/changed-tail", "§5.2.2", func(x *sc) { scAmbiguous(x, "changed-tail") }},
		scenario{"repeated-failure-late-input", "§5.2.3", scRepeatedFailure},
		scenario{"renewed-interruption-recovers", "§5.2.4", scRenewedInterruption},
		scenario{"cancelled-append-recoverable/" + string(faultCancelBeforeCommit), "§5.2.5", func(x *sc) { scCancelled(x, faultCancelBeforeCommit) }},
		scenario{"cancelled-append-recoverable/" + string(faultCommitThenCancel), "§5.2.5", func(x *sc) { scCancelled(x, faultCommitThenCancel) }},
		scenario{"result-checkpoint-is-a-copy", "§5.2.6", scResultCopy},
		scenario{"invalid-checkpoint-refused", "§5.2.7", scInvalidCheckpoint},
		scenario{"legacy-record-resumes", "§5.2.8", scLegacyRecord},
		scenario{"partial-commit-fails-closed", "§5.2.9", scPartialCommit},
	)
}

// The payment agent: one approval-gated charge, default behaviour, no
// guardrails, so the park writes the call and the resume's append is the
// ordinary pending write.
var (
	uCharge   = userItem("charge 7")
	uReceipt  = userItem("What was the receipt?")
	cCharge   = callItem("charge-1", "charge", `{"amount":7}`)
	oCharge   = executed("charge-1", "charge")
	cCharge2  = callItem("charge-2", "charge", `{"amount":7}`)
	oCharge2  = executed("charge-2", "charge")
	cNotify   = callItem("notify-1", "notify", "{}")
	mFresh    = assistantItem("fresh")
	payAgent  = defaultBehavior(guardNone)
	idCharge  = "charge-1"
	idCharge2 = "charge-2"
	idNotify  = "notify-1"
)

func paymentModel() []response {
	return []response{resp("resp_1", cCharge), resp("resp_2", mDone), resp("resp_3", mFresh)}
}

// approvedFailing parks the payment run on a fault session and runs the
// approving resume with fault injected into its first append; the carried
// checkpoint holds the ordinary record.
func (x *sc) approvedFailing(kind faultKind) (*world, session.Session, *faultSession, runOut) {
	x.Helper()
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, paymentModel()...)
	out := x.step(w, runIn{agent: payAgent, s: s, input: items(uCharge)})
	require.NoError(x, out.err)
	require.Equal(x, []string{idCharge}, out.pending)
	x.history(s, items(uCharge, cCharge), "the park writes the call")
	fs.arm(nil, fault{opAppend, 1, kind})
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp, approve: approve(idCharge)})
	fs.disarm()
	require.ErrorIs(x, out.err, kind.wantErr(), "the session's error propagates")
	requireRuns(x, w, map[string]int{idCharge: 1})
	require.Equal(x, 1, w.modelCalls(), "no model call before the settle")
	requireOrdinary(x, out.cp, items(oCharge), "the failed append leaves the record")
	return w, s, fs, out
}

func scRecovered(x *sc, kind faultKind) {
	w, s, _, out := x.approvedFailing(kind)
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp})
	x.finished(out, "done")
	requireRuns(x, w, map[string]int{idCharge: 1})
	x.history(s, items(uCharge, cCharge, oCharge, mDone))
	out = x.step(w, runIn{agent: payAgent, s: s, input: items(uReceipt)})
	x.finished(out, "fresh")
	input := w.inputs[len(w.inputs)-1]
	x.RequireItems(items(uCharge, cCharge, oCharge, mDone, uReceipt), input, "the next run's model sees the pair")
}

func scAmbiguous(x *sc, mismatch string) {
	w, s, _, out := x.approvedFailing(faultFailBeforeCommit)
	var supplied session.Session = s
	switch mismatch {
	case "missing":
		supplied = nil
	case "different-id":
		other := x.Fresh("other")
		x.Add(other, x.All(s))
		supplied = other
	case "changed-tail":
		x.Add(s, items(userItem("another writer")))
	}
	before := x.All(s)
	res := x.step(w, runIn{agent: payAgent, s: supplied, cp: out.cp})
	if mismatch == "changed-tail" {
		require.ErrorIs(x, res.err, runstate.ErrCannotReconcile)
	} else {
		require.ErrorIs(x, res.err, runstate.ErrWrongSession)
	}
	require.Equal(x, 1, w.modelCalls(), "no model call")
	requireRuns(x, w, map[string]int{idCharge: 1})
	x.RequireItems(before, x.All(s), "history untouched")
	if mismatch == "different-id" {
		x.RequireItems(items(uCharge, cCharge), x.All(supplied), "the other session untouched")
	}
	requireOrdinary(x, res.cp, items(oCharge), "the record stays")
}

func scRepeatedFailure(x *sc) {
	w, s, fs, out := x.approvedFailing(faultFailBeforeCommit)
	fs.arm(nil, fault{opAppend, 1, faultFailBeforeCommit})
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp})
	fs.disarm()
	require.ErrorIs(x, out.err, errInjected, "the recovery's append fails too")
	require.Equal(x, 1, w.modelCalls())
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp, input: items(uReceipt)})
	x.finished(out, "done")
	requireRuns(x, w, map[string]int{idCharge: 1})
	x.history(s, items(uCharge, cCharge, oCharge, uReceipt, mDone), "the output lands before the late input")
}

func scRenewedInterruption(x *sc) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, resp("resp_1", cCharge, cNotify), resp("resp_2", mDone))
	out := x.step(w, runIn{agent: payAgent, s: s, input: items(uCharge)})
	require.NoError(x, out.err)
	require.Equal(x, []string{idCharge, idNotify}, out.pending)
	fs.arm(nil, fault{opAppend, 1, faultFailBeforeCommit})
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp, approve: approve(idCharge)})
	fs.disarm()
	require.ErrorIs(x, out.err, errInjected)
	x.history(s, items(uCharge, cCharge, cNotify))
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp})
	require.NoError(x, out.err)
	require.Equal(x, []string{idNotify}, out.pending, "the recovered resume stops on the remaining approval")
	require.Equal(x, 1, w.modelCalls())
	x.history(s, items(uCharge, cCharge, cNotify, oCharge))
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp, reject: approve(idNotify)})
	x.finished(out, "done")
	requireRuns(x, w, map[string]int{idCharge: 1})
	x.history(s, items(uCharge, cCharge, cNotify, oCharge, outputItem(idNotify, rejectionText), mDone))
}

func scCancelled(x *sc, kind faultKind) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, paymentModel()...)
	out := x.step(w, runIn{agent: payAgent, s: s, input: items(uCharge)})
	require.NoError(x, out.err)
	cp := out.cp
	ctx, cancel := context.WithCancel(x.Context())
	defer cancel()
	var nested runOut
	fs.onAppend = func(n int) faultKind {
		if n != 1 {
			return ""
		}
		// A second resume of the same checkpoint while the append is in
		// flight fails fast, before any model call.
		nested = w.run(x.Context(), runIn{agent: payAgent, s: s, cp: cp})
		return kind
	}
	fs.arm(cancel, fault{})
	out = w.run(ctx, runIn{agent: payAgent, s: s, cp: cp, approve: approve(idCharge)})
	fs.disarm()
	fs.onAppend = nil
	require.ErrorIs(x, nested.err, runstate.ErrWriteInProgress)
	require.ErrorIs(x, out.err, context.Canceled)
	require.Equal(x, 1, w.modelCalls())
	requireOrdinary(x, out.cp, items(oCharge), "a cancelled settle stays recoverable")
	out = x.step(w, runIn{agent: payAgent, s: s, cp: x.carry(out.cp)})
	x.finished(out, "done")
	requireRuns(x, w, map[string]int{idCharge: 1})
	x.history(s, items(uCharge, cCharge, oCharge, mDone))
}

func scResultCopy(x *sc) {
	// The result's checkpoint carries a deep copy of the record: changing
	// one never changes the other.
	w, s, _, out := x.approvedFailing(faultFailBeforeCommit)
	snap := out.snapshot
	require.NotSame(x, out.cp, snap)
	item, before := snap.Pending.Items[0], snap.Pending.Before[0]
	snap.Pending.Items[0] = outputItem(idCharge, "changed snapshot")
	snap.Pending.Before[0] = "changed"
	requireOrdinary(x, out.cp, items(oCharge), "the live record is untouched")
	require.NotEqual(x, "changed", out.cp.Pending.Before[0])
	snap.Pending.Items[0], snap.Pending.Before[0] = item, before
	// Resuming from the result's checkpoint recovers.
	res := x.step(w, runIn{agent: payAgent, s: s, cp: x.carry(snap)})
	x.finished(res, "done")
	requireRuns(x, w, map[string]int{idCharge: 1})
	require.Equal(x, 2, w.modelCalls())
	x.history(s, items(uCharge, cCharge, oCharge, mDone))
}

func mustJSON(t require.TestingT, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// editDoc decodes a checkpoint document, lets fn change it, and re-encodes it.
func editDoc(t require.TestingT, b []byte, fn func(doc, pending map[string]any)) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	require.NoError(t, dec.Decode(&doc))
	pending, _ := doc["pending_session_write"].(map[string]any)
	fn(doc, pending)
	return mustJSON(t, doc)
}

func scInvalidCheckpoint(x *sc) {
	_, _, _, out := x.approvedFailing(faultFailBeforeCommit)
	b := mustJSON(x, out.cp)
	cases := map[string]func(doc, p map[string]any){
		"old-schema":            func(doc, _ map[string]any) { doc["$schemaVersion"] = "1.16" },
		"batch-shape":           func(_, p map[string]any) { p["items"] = "not an item batch" },
		"compaction-under-1.17": func(doc, p map[string]any) { doc["$schemaVersion"] = "1.17"; p["has_local_tool_outputs"] = true },
		"acknowledgement-type":  func(_, p map[string]any) { p["append_acknowledged"] = "true" },
		"acknowledgement-without-before": func(_, p map[string]any) {
			p["append_acknowledged"] = true
			p["before"] = nil
		},
		"compaction-exchange-type": func(_, p map[string]any) {
			p["compaction_model_exchange"] = map[string]any{"item_digests": "not a digest list", "reasoning_item_id_policy": nil}
		},
		"compaction-exchange-policy": func(_, p map[string]any) {
			p["compaction_model_exchange"] = map[string]any{"item_digests": []any{}, "reasoning_item_id_policy": "unknown"}
		},
		"acknowledgement-under-1.17": func(doc, p map[string]any) { doc["$schemaVersion"] = "1.17"; p["append_acknowledged"] = true },
	}
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		_, err := runstate.Load(editDoc(x, b, cases[name]))
		require.ErrorIs(x, err, runstate.ErrInvalidPendingWrite, "case %s", name)
	}
}

func scLegacyRecord(x *sc) {
	w, s, _, out := x.approvedFailing(faultFailBeforeCommit)
	b := editDoc(x, mustJSON(x, out.cp), func(doc, _ map[string]any) { doc["$schemaVersion"] = "1.17" })
	cp, err := runstate.Load(b)
	require.NoError(x, err, "a 1.17 four-key record loads")
	require.Equal(x, "1.17", cp.Schema)
	res := x.step(w, runIn{agent: payAgent, s: s, cp: cp})
	x.finished(res, "done")
	requireRuns(x, w, map[string]int{idCharge: 1})
	require.Equal(x, 2, w.modelCalls())
	x.history(s, items(uCharge, cCharge, oCharge, mDone))
}

func scPartialCommit(x *sc) {
	s, fs := wrapFaults(x.Fresh("s"), true)
	w := newWorld(scTools, resp("resp_1", cCharge, cCharge2), resp("resp_2", mDone))
	out := x.step(w, runIn{agent: payAgent, s: s, input: items(uCharge)})
	require.NoError(x, out.err)
	fs.arm(nil, fault{opAppend, 1, faultPartialCommit})
	out = x.step(w, runIn{agent: payAgent, s: s, cp: out.cp, approve: approve(idCharge, idCharge2)})
	fs.disarm()
	require.ErrorIs(x, out.err, errInjected)
	before := x.All(s)
	x.RequireItems(items(uCharge, cCharge, cCharge2, oCharge), before)
	res := x.step(w, runIn{agent: payAgent, s: s, cp: out.cp})
	require.ErrorIs(x, res.err, runstate.ErrCannotReconcile)
	requireRuns(x, w, map[string]int{idCharge: 1, idCharge2: 1})
	require.Equal(x, 1, w.modelCalls())
	x.RequireItems(before, x.All(s), "nothing written")
}
