package heldwrite

import (
	"context"
	"fmt"
	"slices"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The fault matrix: every injectable fault at every session call of a
// settle (the tail read that computes before, the append) and of its
// recovery at the next resume (the recovery tail read, the recovery
// append), for the ordinary pending write (semantics §5.2 items 1, 2, 3, 5, 9)
// and the held batch settling at a resume exit (§5.1 item 18) or at resume
// entry (§5.1 item 12). Each cell asserts that after the fault and one or
// more clean resumes the history is exactly right (every call before its
// output, nothing duplicated, nothing lost, each approved tool run once,
// no model call before the settle, no record left), or, after a partial
// commit, that the documented refusal happens with nothing written.
//
// The cells are written down, not read off the code under test: a settle
// makes the calls in settleCalls (the tail read, then the append of its
// batch), and the first recovery after a fault makes the calls in
// recoveryCalls. Each cell asserts the calls it saw are the table's, so a
// settle that skips its read, appends twice, or a recovery that appends a
// committed batch again fails, whatever the history looks like. The first
// attempt is faulted at each call of settleCalls with each fault that
// applies; for one first fault of each resulting state (before unknown,
// nothing committed, committed) the recovery is faulted at each call of its
// row. That is matrixCells cells per flow and mode. Live cells read through
// LatestReader (when the adapter has it), JSON and stored cells through the
// full-read fallback.

func init() {
	for _, f := range matrixFlows() {
		for _, m := range scModes {
			f, m := f, m
			register(suite.Clause{Name: "held-write/fault-matrix/" + f.name + "/" + string(m), Group: Group, Needs: m.needs(), Run: func(c *suite.C) {
				runMatrix(&sc{C: c, mode: m}, f)
			}})
		}
	}
}

// matrixFlow is one settle path the matrix breaks.
type matrixFlow struct {
	name  string
	agent agentCfg
	model func() []response
	// setup runs the scenario up to the faulted attempt and returns the
	// checkpoint the attempt resumes (already carried).
	setup func(x *sc, w *world, s session.Session) *runstate.Checkpoint
	// approve are the attempt's decisions.
	approve []string
	want    []session.Item
	runs    map[string]int
	// modelBefore is the number of model calls made before the attempt.
	modelBefore int
}

func matrixFlows() []matrixFlow {
	parkFresh := func(a agentCfg, input session.Item, pending ...string) func(x *sc, w *world, s session.Session) *runstate.Checkpoint {
		return func(x *sc, w *world, s session.Session) *runstate.Checkpoint {
			out := x.step(w, runIn{agent: a, s: s, input: items(input)})
			require.NoError(x, out.err)
			require.Equal(x, pending, out.pending)
			return out.cp
		}
	}
	return []matrixFlow{
		{
			name:  "ordinary",
			agent: payAgent,
			model: func() []response {
				return []response{resp("resp_1", cCharge, cCharge2), resp("resp_2", mDone)}
			},
			setup:       parkFresh(payAgent, uCharge, idCharge, idCharge2),
			approve:     approve(idCharge, idCharge2),
			want:        items(uCharge, cCharge, cCharge2, oCharge, oCharge2, mDone),
			runs:        map[string]int{idCharge: 1, idCharge2: 1},
			modelBefore: 1,
		},
		{
			name:  "held-exit",
			agent: deferring(),
			model: func() []response {
				return []response{resp("resp_1", cParked), resp("resp_2", mDone)}
			},
			setup:       parkFresh(deferring(), uDo, idParked),
			approve:     approve(idParked),
			want:        items(uDo, cParked, oParked, mDone),
			runs:        map[string]int{idParked: 1},
			modelBefore: 1,
		},
		{
			name:  "held-entry",
			agent: deferring(),
			model: func() []response {
				return []response{resp("resp_1", cParked), resp("resp_2", mDone)}
			},
			setup: func(x *sc, w *world, s session.Session) *runstate.Checkpoint {
				cp := parkFresh(deferring(), uDo, idParked)(x, w, s)
				out := x.step(w, runIn{agent: deferring(), cp: cp, approve: approve(idParked), cancelAfterTurn: true})
				require.NoError(x, out.err)
				requireHeld(x, out.cp, items(cParked, oParked), "the detached carry")
				return out.cp
			},
			want:        items(uDo, cParked, oParked, mDone),
			runs:        map[string]int{idParked: 1},
			modelBefore: 1,
		},
	}
}

// faultsOf lists every fault that applies to the settle calls of a trace.
func faultsOf(trace []opRecord) []fault {
	var out []fault
	for _, r := range trace {
		if r.op != opRead && r.op != opAppend {
			continue
		}
		for _, k := range faultKindsFor(r.op, r.size) {
			out = append(out, fault{r.op, r.n, k})
		}
	}
	return out
}

// callsUpTo returns how many calls of a settle run when fault f ends it:
// the calls up to and including the faulted one.
func callsUpTo(settle []opRecord, f fault) int {
	for i, r := range settle {
		if r.op == f.op && r.n == f.n {
			return i + 1
		}
	}
	return len(settle)
}

// recoveryRepresentative reports whether the state a first fault of kind k
// leaves gets its recovery faulted too: one kind per state (before
// unknown, nothing committed, committed).
func recoveryRepresentative(k faultKind) bool {
	return k == faultFailRead || k == faultFailBeforeCommit || k == faultLoseAck
}

// settleCalls are the session calls of every flow's settle, before the
// attempt's model call: one tail read (the before digests), then one
// append of the two-item batch (the call and its output, or the two
// outputs).
var settleCalls = []opRecord{{op: opRead, n: 1}, {op: opAppend, n: 1, size: 2}}

// recoveryCalls are the session calls of the first clean recovery after a
// first fault of each kind.
var recoveryCalls = map[faultKind][]opRecord{
	// Nothing was written: read the tail, find nothing, append the batch.
	faultFailRead:           settleCalls,
	faultCancelRead:         settleCalls,
	faultFailBeforeCommit:   settleCalls,
	faultCancelBeforeCommit: settleCalls,
	// The batch committed: the tail read finds it, nothing is appended.
	faultLoseAck:          {{op: opRead, n: 1}},
	faultCommitThenCancel: {{op: opRead, n: 1}},
	// Half the batch committed: the tail read proves neither outcome and
	// the recovery refuses, appending nothing.
	faultPartialCommit: {{op: opRead, n: 1}},
}

// matrixCells is the number of cells per flow and mode: the clean cell,
// 2 read faults + 5 append faults on the settle, then the recovery faulted
// after fail-read (7), fail-before-commit (7) and commit-then-lose-ack (2).
const matrixCells = 1 + 7 + 7 + 7 + 2

// calls strips a trace to what the table states: the operation, its call
// number and its batch size.
func calls(trace []opRecord) []opRecord {
	out := make([]opRecord, len(trace))
	for i, r := range trace {
		out[i] = opRecord{op: r.op, n: r.n, size: r.size}
	}
	return out
}

// maxCellFailures bounds how many failing cells one clause reports.
const maxCellFailures = 8

func runMatrix(x *sc, f matrixFlow) {
	failures := 0
	cells := 0
	run := func(name string, first, recovery []fault) (t1, t2 []opRecord) {
		cells++
		failed, msg := x.Captured(func(c *suite.C) {
			t1, t2 = matrixCell(&sc{C: c, mode: x.mode}, f, fmt.Sprintf("cell%d", cells), first, recovery)
		})
		if failed {
			failures++
			if failures <= maxCellFailures {
				x.Errorf("fault-matrix %s/%s cell %s: %s", f.name, x.mode, name, msg)
			}
		}
		return t1, t2
	}
	expect := func(what string, want, got []opRecord) {
		if got != nil && !slices.Equal(want, calls(got)) {
			failures++
			if failures <= maxCellFailures {
				x.Errorf("fault-matrix %s/%s: %s made the session calls %v, the table says %v", f.name, x.mode, what, calls(got), want)
			}
		}
	}
	base, _ := run("clean", nil, nil)
	expect("the clean settle", settleCalls, base)
	for _, f1 := range faultsOf(settleCalls) {
		want, ok := recoveryCalls[f1.kind]
		if !ok {
			x.Fatalf("fault-matrix: no recovery row for %s", f1.kind)
		}
		t1, rec := run(f1.String(), []fault{f1}, nil)
		expect("the settle faulted with "+f1.String(), settleCalls[:callsUpTo(settleCalls, f1)], t1)
		expect("the recovery after "+f1.String(), want, rec)
		if !recoveryRepresentative(f1.kind) {
			continue
		}
		for _, f2 := range faultsOf(want) {
			run(f1.String()+" then "+f2.String(), []fault{f1}, []fault{f2})
		}
	}
	if cells != matrixCells {
		x.Errorf("fault-matrix %s/%s: ran %d cells, the table has %d", f.name, x.mode, cells, matrixCells)
	}
	if failures > maxCellFailures {
		x.Errorf("fault-matrix %s/%s: %d of %d cells failed (first %d shown)", f.name, x.mode, failures, cells, maxCellFailures)
	}
	x.Logf("fault-matrix %s/%s: %d cells", f.name, x.mode, cells)
}

// matrixCell runs one cell on a fresh session: the setup, the attempt with
// first injected, the recovery attempts (the first with recovery injected)
// until the run completes, then the assertions. It returns the traces of
// the attempt and of the first recovery attempt.
func matrixCell(x *sc, f matrixFlow, id string, first, recovery []fault) (t1, t2 []opRecord) {
	// Live cells read the tail through LatestReader when the adapter has
	// it, JSON cells through the full-read fallback; Run's
	// capabilities-hidden pass runs both through the fallback.
	s, fs := wrapFaults(x.Fresh(id), x.mode == modeLive)
	w := newWorld(scTools, f.model()...)
	cp := f.setup(x, w, s)
	require.Equal(x, f.modelBefore, w.modelCalls())
	// Faults (and traces) cover the calls before the attempt's first model
	// call: the settle and its recovery.
	w.beforeLLM = fs.disarm

	attempt := func(cp *runstate.Checkpoint, faults []fault, approvals []string) (runOut, []opRecord, []fault) {
		ctx, cancel := context.WithCancel(x.Context())
		defer cancel()
		fs.arm(cancel, faults...)
		out := w.run(ctx, runIn{agent: f.agent, s: s, cp: cp, approve: approvals})
		fs.disarm()
		return out, fs.traced(), fs.fired()
	}

	out, t1, fired := attempt(cp, first, f.approve)
	if len(first) == 0 {
		require.NoError(x, out.err, "the clean attempt")
		finishCell(x, f, w, s, out)
		return t1, nil
	}
	require.Equal(x, first, fired, "the fault fired")
	require.ErrorIs(x, out.err, first[0].kind.wantErr(), "the session's error propagates")
	requireRuns(x, w, f.runs)
	require.Equal(x, f.modelBefore, w.modelCalls(), "no model call before the settle")
	require.NotNil(x, out.cp.Pending, "a failed settle leaves its record")
	require.False(x, out.cp.Pending.Held, "a settling batch is registered as the ordinary pending write")
	partial := first[0].kind == faultPartialCommit
	cp = x.carry(out.cp)

	for n := 0; ; n++ {
		require.Less(x, n, 4, "the run must complete within a few clean resumes")
		var faults []fault
		if n == 0 {
			faults = recovery
		}
		before := x.All(s)
		out, trace, fired := attempt(cp, faults, nil)
		if n == 0 {
			t2 = trace
		}
		if partial {
			// A partial commit proves neither outcome: refuse, write nothing.
			require.ErrorIs(x, out.err, runstate.ErrCannotReconcile)
			x.RequireItems(before, x.All(s), "a refused recovery writes nothing")
			require.Equal(x, f.modelBefore, w.modelCalls(), "no model call")
			requireRuns(x, w, f.runs)
			require.NotNil(x, out.cp.Pending, "the refused record stays")
			return t1, t2
		}
		if len(fired) > 0 {
			require.Equal(x, faults, fired, "the recovery fault fired")
			require.ErrorIs(x, out.err, fired[0].kind.wantErr())
			require.Equal(x, f.modelBefore, w.modelCalls(), "no model call before the recovery")
			requireRuns(x, w, f.runs)
			require.NotNil(x, out.cp.Pending, "a failed recovery keeps the record")
			partial = fired[0].kind == faultPartialCommit
			cp = x.carry(out.cp)
			continue
		}
		require.NoError(x, out.err, "a clean resume recovers")
		finishCell(x, f, w, s, out)
		return t1, t2
	}
}

func finishCell(x *sc, f matrixFlow, w *world, s session.Session, out runOut) {
	x.Helper()
	require.True(x, out.done, "the run finishes")
	require.Equal(x, "done", out.final)
	requireNoRecord(x, out.cp, "the live checkpoint")
	requireNoRecord(x, out.snapshot, "the result checkpoint")
	requireRuns(x, w, f.runs)
	require.Equal(x, f.modelBefore+1, w.modelCalls())
	requireHistory(x, x.Context(), s, f.want)
}
