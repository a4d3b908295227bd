package runstate_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The Run's property test (issue 34, item 2): random programs of the
// Run's public API, valid and invalid calls alike, on two copies of a Run
// over one session (each copy dropped and opened again at random: a
// restart; a copy that finishes the run drops the other, see
// TestRunPropertyFoundDefects), on the memory store and SQLite, with the
// output-guardrail gate on and off. Any call may fail; after every step
//
//  1. history.Diagnose finds nothing severe in the session;
//  2. no call is claimed by two copies at once, and no tool runs twice
//     for a call without an in-doubt report between the runs;
//  3. every stored checkpoint loads;
//  4. no call's output appears twice in the session.
//
// TestRunProperty runs seeded random programs, FuzzRunOps fuzzed ones;
// TestRunPropertyCatchesABrokenRun shows each of the Run's test hooks
// (run.go) breaks an invariant.

// runOp is one call of a program.
type runOp int

const (
	rOpen runOp = iota // drop the slot's copy and open it again (a restart)
	rDrop              // drop the slot's copy (a crash); its next op opens it again
	rInput
	rTurn
	rInterrupt
	rClaim
	rReclaim
	rOutput
	rAbandon
	rSettle
	rFinish
	numRunOps
)

var runOpNames = [numRunOps]string{"Open", "Drop", "Input", "Turn", "Interrupt", "Claim", "Reclaim", "Output", "Abandon", "Settle", "Finish"}

func (o runOp) String() string { return runOpNames[o] }

// runOpTable is what an op byte picks (its low 7 bits, modulo the length;
// its top bit is the slot): the weights of a random program.
var runOpTable = []runOp{
	rOpen, rDrop,
	rInput, rInput,
	rTurn, rTurn,
	rInterrupt, rInterrupt, rInterrupt,
	rClaim, rClaim, rClaim,
	rReclaim, rReclaim,
	rOutput, rOutput, rOutput, rOutput,
	rAbandon,
	rSettle, rSettle, rSettle,
	rFinish,
}

// maxRunProgram bounds a program's length (a fuzzed input's).
const maxRunProgram = 256

// runWorld is a backend with a gate.
type runWorld struct {
	name string
	open func(id string) session.CheckpointStore
	opts runstate.Options
	// execs is how many random programs TestRunProperty runs in it.
	execs int
}

// runWorlds are the memory store and an SQLite file in dir, each with the
// gate on and off. close closes the SQLite store.
func runWorlds(dir string) (worlds []runWorld, close func(), err error) {
	mem := memory.New(memory.Options{})
	lite, err := sqlite.OpenFile(ctx, filepath.Join(dir, "runprop.db"), sqlite.Options{})
	if err != nil {
		return nil, nil, err
	}
	backends := []struct {
		name  string
		open  func(id string) session.CheckpointStore
		execs int
	}{
		{"memory", func(id string) session.CheckpointStore { return must1(mem.Session(id)) }, 300},
		// SQLite (modernc.org/sqlite, C translated to Go) is some five
		// times slower per step under -race.
		{"sqlite", func(id string) session.CheckpointStore { return must1(lite.Session(id)) }, 100},
	}
	for _, b := range backends {
		for _, g := range gates {
			worlds = append(worlds, runWorld{name: b.name + "/" + g.name, open: b.open, opts: g.opts, execs: b.execs})
		}
	}
	return worlds, func() { _ = lite.Close() }, nil
}

// runStats counts what the programs did.
type runStats struct {
	execs, steps    int
	tried, ok, grew [numRunOps]int // grew: the session grew in the step
}

func (s *runStats) add(o *runStats) {
	s.execs += o.execs
	s.steps += o.steps
	for i := range s.tried {
		s.tried[i] += o.tried[i]
		s.ok[i] += o.ok[i]
		s.grew[i] += o.grew[i]
	}
}

func (s *runStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d executions, %d steps; per op, succeeded/tried (steps that appended to the session):", s.execs, s.steps)
	for i := range numRunOps {
		fmt.Fprintf(&b, " %s %d/%d", i, s.ok[i], s.tried[i])
		if s.grew[i] > 0 {
			fmt.Fprintf(&b, " (%d)", s.grew[i])
		}
	}
	return b.String()
}

// runViolation is a broken invariant, with the program's trace.
type runViolation struct {
	Invariant string // "severe", "claim", "checkpoint" or "duplicate-output"
	Msg       string
	Trace     []string
}

func (v *runViolation) Error() string {
	return fmt.Sprintf("invariant %s broken: %s\ntrace:\n  %s", v.Invariant, v.Msg, strings.Join(v.Trace, "\n  "))
}

// runCopy is one copy of the Run, as a slot holds it.
type runCopy struct {
	r  *runstate.Run
	id int // which Open made it (1, 2, ...)
}

// runCall is the model of one call id.
type runCall struct {
	holder   int          // the copy whose claim stands (0: none)
	claimers map[int]bool // copies whose claim succeeded, until they record its output
	recorded bool         // its output is recorded (in the session or the stored checkpoint)
	runs     int          // tool runs: claims that succeeded, not counting a copy's repeats
	doubted  bool         // reported in doubt since its last run
}

// runExec is one execution of a program.
type runExec struct {
	w      runWorld
	sid    string
	slots  [2]*runCopy
	copies int
	calls  map[string]*runCall
	known  []string       // every call id generated, oldest first
	fresh  int            // ids generated
	rest   []session.Item // the rest of the last interrupted turn, for Settle
	stats  runStats
	trace  []string
	loaded []byte // the checkpoint last checked
	length int    // of the session, at the last check
}

// runSessions numbers the executions' sessions.
var runSessions atomic.Int64

// runProgram runs prog on a new session of w, checking the invariants
// after each step. A broken invariant is a *runViolation; any other error
// is the test's own (a store that cannot be read).
func runProgram(w runWorld, prog []byte) (runStats, error) {
	if len(prog) > maxRunProgram {
		prog = prog[:maxRunProgram]
	}
	e := &runExec{w: w, sid: fmt.Sprintf("runprop-%d", runSessions.Add(1)), calls: map[string]*runCall{}}
	e.stats.execs = 1
	for i := 0; i < len(prog); {
		b := prog[i]
		i++
		arg := func() byte {
			if i < len(prog) {
				i++
				return prog[i-1]
			}
			return 0
		}
		op, slot := runOpTable[int(b&0x7f)%len(runOpTable)], int(b>>7)
		if err := e.do(op, slot, arg); err != nil {
			return e.stats, e.traced(err)
		}
		e.stats.steps++
		if op == rDrop {
			continue // nothing written
		}
		if err := e.check(op, false); err != nil {
			return e.stats, e.traced(err)
		}
	}
	return e.stats, e.traced(e.check(-1, true))
}

func (e *runExec) violation(invariant, format string, args ...any) error {
	return &runViolation{Invariant: invariant, Msg: fmt.Sprintf(format, args...)}
}

// traced attaches the trace to a violation.
func (e *runExec) traced(err error) error {
	var v *runViolation
	if errors.As(err, &v) {
		v.Trace = e.trace
	}
	return err
}

func (e *runExec) call(id string) *runCall {
	c := e.calls[id]
	if c == nil {
		c = &runCall{claimers: map[int]bool{}}
		e.calls[id] = c
	}
	return c
}

// newID returns a call id never used before.
func (e *runExec) newID() string {
	e.fresh++
	id := fmt.Sprintf("c%d", e.fresh)
	e.known = append(e.known, id)
	return id
}

// unknownID returns an id that names no call, ever.
func (e *runExec) unknownID() string {
	e.fresh++
	return fmt.Sprintf("u%d", e.fresh)
}

// pick returns one of preferred most of the time, else any known id or
// one that names no call.
func (e *runExec) pick(b byte, preferred []string) string {
	if len(preferred) > 0 && b&3 != 0 {
		return preferred[int(b>>2)%len(preferred)]
	}
	all := append(slices.Clone(preferred), e.known...)
	all = append(all, "nosuch")
	return all[int(b>>2)%len(all)]
}

func (e *runExec) open(slot int) {
	e.slots[slot] = nil
	e.copies++
	r, err := runstate.Open(ctx, e.w.open(e.sid), e.w.opts)
	e.stats.tried[rOpen]++
	if err == nil {
		e.stats.ok[rOpen]++
		e.slots[slot] = &runCopy{r: r, id: e.copies}
	}
	e.log(slot, rOpen, "", err)
}

func (e *runExec) log(slot int, op runOp, args string, err error) {
	res := "ok"
	if err != nil {
		res = err.Error()
	}
	id := 0
	if c := e.slots[slot]; c != nil {
		id = c.id
	}
	e.trace = append(e.trace, fmt.Sprintf("%c(copy %d) %s(%s): %s", 'A'+slot, id, op, args, res))
}

func (e *runExec) do(op runOp, slot int, arg func() byte) error {
	switch op {
	case rOpen:
		e.open(slot)
		return nil
	case rDrop:
		e.stats.tried[rDrop]++
		e.stats.ok[rDrop]++
		e.log(slot, rDrop, "", nil)
		e.slots[slot] = nil
		return nil
	}
	if e.slots[slot] == nil {
		e.open(slot)
		if e.slots[slot] == nil {
			return nil
		}
	}
	c := e.slots[slot]
	r := c.r
	var (
		err  error
		args string
		viol error
	)
	resp := fmt.Sprintf("resp_%d", len(e.trace))
	switch op {
	case rInput:
		err = r.Input(ctx, user("hi"))
	case rTurn:
		its := e.turnItems(arg())
		args = describe(its)
		err = r.Turn(ctx, resp, its...)
	case rInterrupt:
		its, awaiting, rest := e.interruptArgs(arg(), arg())
		args = describe(its) + " awaiting " + strings.Join(awaiting, ",")
		err = r.Interrupt(ctx, resp, its, awaiting...)
		if err == nil {
			e.rest = rest
		}
	case rClaim, rReclaim:
		preferred := r.InDoubt()
		if op == rClaim {
			preferred = append(r.Awaiting(), preferred...)
		}
		id := e.pick(arg(), preferred)
		args = id
		doubted := slices.Contains(r.InDoubt(), id)
		if op == rClaim {
			err = r.Claim(ctx, id)
		} else {
			err = r.Reclaim(ctx, id)
		}
		if err == nil {
			viol = e.claimed(c, id, op == rReclaim, doubted)
		}
	case rOutput, rAbandon:
		id := e.pick(arg(), r.Checkpoint().Step.PendingCallIDs)
		args = id
		if op == rOutput {
			err = r.Output(ctx, toolOutput(id, "ok"))
		} else {
			err = r.Abandon(ctx, id, "outcome unknown")
		}
		if err == nil {
			m := e.call(id)
			m.recorded = true
			delete(m.claimers, c.id)
		}
	case rSettle:
		its := e.settleItems(arg())
		args = describe(its)
		err = r.Settle(ctx, its...)
	case rFinish:
		var its []session.Item
		if arg()%2 == 1 {
			its = items(assistant("done"))
		}
		args = describe(its)
		err = r.Finish(ctx, resp, its...)
	}
	var doubt *runstate.InDoubtError
	if errors.As(err, &doubt) {
		for _, id := range doubt.CallIDs {
			e.call(id).doubted = true
		}
	}
	e.stats.tried[op]++
	if err == nil {
		e.stats.ok[op]++
	}
	e.log(slot, op, args, err)
	return viol
}

// claimed updates the model for copy c's successful Claim (or Reclaim)
// of id and returns a violation of invariant 2.
func (e *runExec) claimed(c *runCopy, id string, reclaim, doubted bool) error {
	m := e.call(id)
	if m.claimers[c.id] && !reclaim {
		return nil // the copy's own claim, again: no new run
	}
	switch {
	case reclaim && !doubted:
		return e.violation("claim", "copy %d reclaimed %s, which it did not report in doubt", c.id, id)
	case m.recorded:
		return e.violation("claim", "copy %d claimed %s after its output was recorded", c.id, id)
	case !reclaim && m.holder != 0 && m.holder != c.id:
		return e.violation("claim", "copy %d claimed %s while copy %d's claim stands", c.id, id, m.holder)
	case m.runs > 0 && !m.doubted && !doubted:
		return e.violation("claim", "%s's tool runs a second time (copy %d) without an in-doubt report", id, c.id)
	}
	m.holder, m.claimers[c.id], m.doubted = c.id, true, false
	m.runs++
	return nil
}

// turnItems are a Turn's items: answered and unanswered calls, messages.
func (e *runExec) turnItems(b byte) []session.Item {
	switch b % 4 {
	case 0:
		return items(assistant("thinking"))
	case 1:
		id := e.newID()
		return items(toolCall(id), toolOutput(id, "ok"))
	case 2:
		return items(toolCall(e.newID())) // unanswered: a later Interrupt may await it
	default:
		id := e.newID()
		return items(assistant("let me"), toolCall(id), toolOutput(id, "ok"), assistant("done"))
	}
}

// interruptArgs are an Interrupt's items and awaited ids, valid or not,
// and the rest of the turn a Settle of it hands over.
func (e *runExec) interruptArgs(shape, b byte) (its []session.Item, awaiting []string, rest []session.Item) {
	switch shape % 7 {
	case 0, 1: // new calls, all awaited
		for range 1 + int(b%2) {
			id := e.newID()
			its = append(its, toolCall(id))
			awaiting = append(awaiting, id)
		}
		if b&4 != 0 {
			its = append(items(assistant("may I?")), its...)
		}
	case 2: // two new calls, one awaited
		id := e.newID()
		its = items(toolCall(id), toolCall(e.newID()))
		awaiting = []string{id}
	case 3: // a call of an earlier turn, answered or not, or no call at all
		awaiting = []string{e.pick(b, nil)}
	case 4: // a new call and an id that names no call
		id := e.newID()
		its = items(toolCall(id))
		awaiting = []string{id, e.unknownID()}
	case 5: // a call answered in the turn
		id := e.newID()
		its = items(toolCall(id), toolOutput(id, "ok"))
		awaiting = []string{id}
	default: // no call at all
		its = items(assistant("may I?"))
		awaiting = []string{e.unknownID()}
	}
	id := e.newID()
	rest = items(toolCall(id), toolOutput(id, "ok"), assistant("done"))
	return its, awaiting, rest
}

// settleItems are a Settle's items: none, the rest of the last
// interrupted turn (which must never land twice), or a new message.
func (e *runExec) settleItems(b byte) []session.Item {
	switch b % 4 {
	case 0:
		return nil
	case 1, 2:
		return e.rest
	default:
		return items(assistant("and then"))
	}
}

func describe(its []session.Item) string {
	var parts []string
	for _, it := range its {
		if k, ok := history.CallKey(it); ok {
			parts = append(parts, "call "+k.ID)
		} else if k, ok := history.AnsweredKey(it); ok {
			parts = append(parts, "output "+k.ID)
		} else {
			parts = append(parts, "message")
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// check reads the session and its checkpoint afresh and checks
// invariants 1, 3 and 4; it also notes the outputs recorded and the calls
// a copy reports in doubt, for invariant 2, and whether op (-1: none)
// appended. With every, it checks every stored checkpoint, not only the
// Runs' (DefaultName).
func (e *runExec) check(op runOp, every bool) error {
	s := e.w.open(e.sid)
	all, err := session.All(ctx, s)
	if err != nil {
		return fmt.Errorf("read session %s: %w", e.sid, err)
	}
	if len(all) > e.length && op >= 0 {
		e.stats.grew[op]++
	}
	e.length = len(all)
	outputs := map[string]int{}
	for _, it := range all {
		if k, ok := history.AnsweredKey(it); ok {
			if outputs[k.ID]++; outputs[k.ID] > 1 {
				return e.violation("duplicate-output", "%s's output appears twice in %s", k.ID, describe(all))
			}
			e.call(k.ID).recorded = true
		}
	}
	if ps := severe(all); len(ps) > 0 {
		return e.violation("severe", "history.Diagnose: %v in %s", ps, describe(all))
	}
	names := []string{runstate.DefaultName} // the only name a program's Runs use
	if every {
		if names, err = s.ListCheckpoints(ctx); err != nil {
			return fmt.Errorf("list checkpoints of %s: %w", e.sid, err)
		}
	}
	for _, name := range names {
		doc, _, err := s.LoadCheckpoint(ctx, name)
		if errors.Is(err, session.ErrNoCheckpoint) {
			continue
		}
		if err != nil {
			return fmt.Errorf("load checkpoint %q of %s: %w", name, e.sid, err)
		}
		if bytes.Equal(doc, e.loaded) {
			continue // loaded at an earlier step
		}
		cp, err := runstate.Load(doc)
		if err != nil {
			return e.violation("checkpoint", "checkpoint %q does not load: %v\n%s", name, err, doc)
		}
		e.loaded = doc
		if w := cp.Pending; w != nil && w.Held {
			for _, it := range w.Items {
				if k, ok := history.AnsweredKey(it); ok {
					e.call(k.ID).recorded = true
				}
			}
		}
	}
	for _, c := range e.slots {
		if c != nil {
			for _, id := range c.r.InDoubt() {
				e.call(id).doubted = true
			}
		}
	}
	return nil
}

// randomProgram is a random program of n op bytes with their arguments.
func randomProgram(rng *rand.Rand, n int) []byte {
	prog := make([]byte, 0, 3*n)
	for range n {
		prog = append(prog, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()))
	}
	return prog
}

// runExecutions runs n random programs (seeded by seed) in w and returns
// the counts and the first error.
func runExecutions(w runWorld, seed uint64, n int) (runStats, error) {
	var total runStats
	rng := rand.New(rand.NewPCG(seed, 34))
	for range n {
		st, err := runProgram(w, randomProgram(rng, 10+rng.IntN(30)))
		total.add(&st)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func TestRunProperty(t *testing.T) {
	worlds, closeAll, err := runWorlds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	var total runStats
	for i, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			for _, seed := range runPropSeeds {
				st, err := runProgram(w, seed)
				total.add(&st)
				if err != nil {
					t.Fatalf("seed %q: %v", seed, err)
				}
			}
			st, err := runExecutions(w, uint64(i), w.execs)
			total.add(&st)
			t.Logf("%s", &st)
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("in all: %s", &total)
}

// FuzzRunOps runs a fuzzed program: its first byte picks the backend and
// the gate, the rest is ops (see runOpTable) and their arguments.
func FuzzRunOps(f *testing.F) {
	for _, seed := range runPropSeeds {
		for w := range byte(4) {
			f.Add(append([]byte{w}, seed...))
		}
	}
	worlds, closeAll, err := runWorlds(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(closeAll)
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) == 0 {
			return
		}
		if _, err := runProgram(worlds[int(prog[0])%len(worlds)], prog[1:]); err != nil {
			t.Fatal(err)
		}
	})
}

// op is the byte of op o on slot (0 or 1), for writing seeds.
func op(o runOp, slot int) byte {
	return byte(slices.Index(runOpTable, o) | slot<<7)
}

// runPropSeeds are programs through each path: the approval flow across
// a restart, two copies racing to claim, a crash inside a tool resolved by
// Reclaim, Output and Abandon, a second settle of one turn, invalid
// awaited ids, and outputs for calls not awaited.
var runPropSeeds = [][]byte{
	// Input, Interrupt awaiting a new call, restart, Output, Settle with
	// the rest of the turn, Finish.
	{op(rInput, 0), op(rInterrupt, 0), 0, 0, op(rOpen, 0), op(rClaim, 0), 1, op(rOutput, 0), 1, op(rSettle, 0), 1, op(rFinish, 0), 1},
	// Two copies on the parked call: both claim (one wins), both output,
	// both settle.
	{op(rInput, 0), op(rInterrupt, 0), 0, 0, op(rOpen, 0), op(rOpen, 1), op(rClaim, 0), 1, op(rClaim, 1), 1,
		op(rOutput, 1), 1, op(rOutput, 0), 1, op(rSettle, 0), 1, op(rSettle, 1), 1},
	// A crash inside the tool: the next copy finds it in doubt, cannot
	// claim it, reclaims it, a third copy abandons it.
	{op(rInput, 0), op(rInterrupt, 0), 1, 0, op(rClaim, 0), 1, op(rDrop, 0), op(rOpen, 1), op(rClaim, 1), 1,
		op(rReclaim, 1), 1, op(rOpen, 0), op(rAbandon, 0), 1, op(rOutput, 0), 5, op(rSettle, 0), 0, op(rTurn, 0), 1},
	// A second settle of one turn, by a copy opened after the first.
	{op(rInput, 0), op(rInterrupt, 0), 0, 0, op(rOutput, 0), 1, op(rSettle, 0), 1, op(rOpen, 1), op(rSettle, 1), 1,
		op(rSettle, 0), 1, op(rFinish, 1), 0},
	// Awaited ids that name no call, answered calls, calls of an earlier
	// turn; outputs for calls not awaited.
	{op(rInput, 0), op(rInterrupt, 0), 6, 0, op(rOutput, 0), 1, op(rInterrupt, 0), 4, 0, op(rOutput, 0), 0,
		op(rInterrupt, 0), 5, 0, op(rTurn, 0), 2, op(rInterrupt, 0), 3, 8, op(rOutput, 0), 1, op(rSettle, 0), 1},
	// Turn while calls await, Settle with items when nothing is open,
	// Finish while a claimed call runs, then a restart.
	{op(rInput, 0), op(rSettle, 0), 3, op(rInterrupt, 0), 0, 1, op(rTurn, 0), 0, op(rClaim, 0), 1,
		op(rFinish, 0), 1, op(rOutput, 0), 1, op(rOpen, 0), op(rOutput, 0), 5, op(rSettle, 0), 2, op(rFinish, 0), 1},
}

// runBroken runs the seeds and n random programs per gate on the memory
// store with hook b on, and returns per gate how many executions ran and
// how many broke invariant, with the first such violation.
func runBroken(t *testing.T, b runstate.RunBreak, invariant string, n int) (execs, caught [2]int, first *runViolation) {
	t.Helper()
	worlds, closeAll, err := runWorlds(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	restore := runstate.BreakRun(b)
	defer restore()
	for g, w := range worlds[:2] { // memory, gate on and off
		rng := rand.New(rand.NewPCG(uint64(b), 3434))
		progs := slices.Clone(runPropSeeds)
		for range n {
			progs = append(progs, randomProgram(rng, 10+rng.IntN(30)))
		}
		for _, prog := range progs {
			execs[g]++
			if v := asViolation(t, w, prog); v != nil && v.Invariant == invariant {
				caught[g]++
				if first == nil {
					first = v
				}
			}
		}
	}
	return execs, caught, first
}

// asViolation runs prog in w and returns its violation, if any.
func asViolation(t *testing.T, w runWorld, prog []byte) *runViolation {
	t.Helper()
	_, err := runProgram(w, prog)
	var v *runViolation
	if err != nil && !errors.As(err, &v) {
		t.Fatal(err)
	}
	return v
}

func TestRunPropertyCatchesABrokenRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         runstate.RunBreak
		invariant string
	}{
		{"Interrupt does not check awaited ids", runstate.BreakInterruptCheck, "severe"},
		{"Claim does not write", runstate.BreakClaimWrite, "claim"},
		{"Settle appends when nothing is open", runstate.BreakSettleNothing, "duplicate-output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			execs, caught, v := runBroken(t, tc.b, tc.invariant, 100)
			if v == nil {
				t.Fatalf("no violation of invariant %s in %d executions", tc.invariant, execs[0]+execs[1])
			}
			t.Logf("invariant %s broken by %d of %d executions with the gate on, %d of %d with it off; the first:\n%v",
				tc.invariant, caught[0], execs[0], caught[1], execs[1], v)
		})
	}
}

// Two defects of the Run the property found, each red before its fix.
//
// A stale output after a reload: Output under the gate folded the output
// into the Run's r.outputs before it saved, and kept it there when the
// save failed (ErrCheckpointConflict). A later call that failed otherwise
// (Input's "another pending session write stands") reloaded the stored
// checkpoint into the Run but kept r.outputs, and the next Settle landed
// that output, whose call is nowhere: an orphan output. (Now a failed
// Output or Interrupt puts the Run back as it was, and a reload forgets
// the outputs.)
//
// A copy stale across a Finish: Finish deleted the checkpoint, and the
// stores number a checkpoint's versions from 1 again once it is deleted
// (0 is "none stored"), so a stale copy's version could be the next
// run's: its save succeeded, and it landed what it held a second time, or
// outputs of calls it never stored. (Now Finish leaves an idle checkpoint,
// whose versions keep counting.)

// staleOutputSeed: copies A and B open a new run; B parks c1; A's
// Interrupt of c3 and its Output of c3 fail (B saved first); A's Input
// fails and reloads B's checkpoint; A answers c1 and settles, and c3's
// output lands without c3. (Gate on.)
var staleOutputSeed = []byte{op(rOpen, 0), op(rOpen, 1), op(rInterrupt, 1), 0, 0, op(rInterrupt, 0), 0, 0,
	op(rOutput, 0), 1, op(rInput, 0), op(rOutput, 0), 1, op(rSettle, 0), 0}

// staleAcrossFinishSeed: copy A parks c1 (the checkpoint's version 1);
// copy B answers it, settles and finishes (the checkpoint is deleted),
// then gives the next run its input (version 1 again, before the fix); A, stale, records
// c1's output under version 1 and settles. (Gate on.)
var staleAcrossFinishSeed = []byte{op(rInterrupt, 0), 0, 0, op(rOpen, 1), op(rOutput, 1), 1, op(rSettle, 1), 0,
	op(rFinish, 1), 0, op(rInput, 1), op(rOutput, 0), 1, op(rSettle, 0), 0}

func TestRunPropertyFoundDefects(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed []byte
	}{
		{"a stale output after a reload", staleOutputSeed},
		{"a copy stale across a Finish", staleAcrossFinishSeed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			worlds, closeAll, err := runWorlds(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll()
			var found []string
			for _, w := range worlds {
				if v := asViolation(t, w, tc.seed); v != nil {
					found = append(found, fmt.Sprintf("%s: %v", w.name, v))
				}
			}
			if len(found) > 0 {
				t.Fatalf("%s:\n%s", tc.name, strings.Join(found, "\n"))
			}
		})
	}
}
