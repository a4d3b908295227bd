package heldwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// This file is a tiny scripted agent loop for the run-state scenarios: no
// model and no network, a canned "model" that returns scripted responses, a
// tool registry that counts executions per call id, output guardrails that
// pass, trip or crash, a tool-use behaviour, approvals, detached runs, a
// max-turns handler and an after-turn cancel. It drives the runstate API
// exactly as a Go agent loop would (Save per turn, Park at a gated
// interruption, Resume at resume entry, ExtendHeld as tool outputs commit,
// TakeHeld + SaveResumedTurn at gate-legal exits, DiscardHeld(After) at
// the discard exits, CheckOutputGuardrailGate, Clone for result
// checkpoints) and touches the Session only through the session package.

// Tool-use behaviours (Python's tool_use_behavior).
const (
	behaviorRunAgain  = "run_llm_again"      // the default: outputs go back to the model
	behaviorStopFirst = "stop_on_first_tool" // the first tool output is the final output
	behaviorStopAt    = "stop_at_tools"      // outputs of the tools in stopAt are final
)

// rejectionText is the output a rejected call gets.
const rejectionText = "Tool execution was not approved."

// withheldText replaces a tool output when an output guardrail trips.
const withheldText = "Output withheld by an output guardrail."

// The loop's own errors.
var (
	errTripwire       = errors.New("scenario: output guardrail tripwire triggered")
	errGuardrailCrash = errors.New("scenario: output guardrail crashed")
	errMaxTurns       = errors.New("scenario: max turns exceeded")
	errModelExhausted = errors.New("scenario: the scripted model has no response left")
	errNothingToRun   = errors.New("scenario: the checkpoint has no resumable step")
)

// guard is an agent's output guardrail configuration.
type guard int

const (
	guardNone  guard = iota // no output guardrails
	guardPass               // guardrails that always pass
	guardTrip               // guardrails whose tripwire triggers
	guardCrash              // guardrails that raise
)

// toolSpec is one tool of the registry.
type toolSpec struct {
	approval bool // needs approval before it runs
	handoff  bool // a handoff: its output switches the agent, the run continues
}

// response is one canned model response.
type response struct {
	id    string
	items []session.Item
}

// agentCfg is the agent (and run config) a run uses.
type agentCfg struct {
	guard    guard
	behavior string
	stopAt   []string
	// filter is a handoff input filter: it gets the resolved turn's session
	// items and returns the ones the history keeps.
	filter func([]session.Item) []session.Item
	// maxCalls bounds the model calls of one run (0: unbounded); the next
	// call goes to onMaxTurns instead.
	maxCalls   int
	onMaxTurns func() (string, error)
	policy     *runstate.Policy
	store      *bool
}

// defers is the deferral gate (Python's _should_defer_interrupted_session_items).
func (a agentCfg) defers() bool {
	return runstate.ShouldDefer(a.guard != guardNone, runstate.ToolUseBehavior(a.behavior))
}

func (a agentCfg) stops(tool string) bool {
	switch a.behavior {
	case behaviorStopFirst:
		return true
	case behaviorStopAt:
		return slices.Contains(a.stopAt, tool)
	}
	return false
}

// world is one scenario's model, tools and effects.
type world struct {
	tools     map[string]toolSpec
	model     []response
	next      int
	inputs    [][]session.Item // the model input of each fresh run's first call
	runs      map[string]int   // executions per call id
	beforeLLM func()           // called before every model call
}

func newWorld(tools map[string]toolSpec, model ...response) *world {
	return &world{tools: tools, model: model, runs: map[string]int{}}
}

// modelCalls returns how many responses the model gave.
func (w *world) modelCalls() int { return w.next }

func (w *world) respond() (response, error) {
	if w.beforeLLM != nil {
		w.beforeLLM()
	}
	if w.next >= len(w.model) {
		return response{}, errModelExhausted
	}
	r := w.model[w.next]
	w.next++
	return r, nil
}

func (w *world) execute(call session.Item) session.Item {
	w.runs[call.CallID()]++
	name, _ := call.StringField("name")
	return outputItem(call.CallID(), name+":"+call.CallID())
}

// runIn is one invocation of the loop: a fresh run (cp nil) or a resume.
type runIn struct {
	agent agentCfg
	s     session.Session      // nil: detached
	cp    *runstate.Checkpoint // nil: a fresh run
	input []session.Item       // a fresh run's input, or late input on a resume
	// approve and reject are the decisions for pending calls.
	approve, reject []string
	// cancelAfterTurn stops the run after its current turn, leaving a
	// run-again checkpoint (the streaming runner's cancel(mode="after_turn")).
	cancelAfterTurn bool
}

// runOut is what a run left.
type runOut struct {
	cp       *runstate.Checkpoint // the live checkpoint the run used
	snapshot *runstate.Checkpoint // the result's checkpoint (a Clone at exit)
	final    string               // the final output, when done
	done     bool                 // a final output was produced
	pending  []string             // the calls awaiting approval, when interrupted
	err      error
}

// turnData is the loop's record of the current turn, riding the checkpoint
// as an unmodelled member (as RunState carries its generated items).
type turnData struct {
	ResponseID string         `json:"response_id"`
	Items      []session.Item `json:"items"`   // the model's response
	Outputs    []session.Item `json:"outputs"` // outputs resolved so far
}

const turnMember = "scenario_turn"

// loop is one run in progress.
type loop struct {
	w     *world
	ctx   context.Context
	cp    *runstate.Checkpoint
	in    runIn
	calls int
	out   *runOut
}

// runCtxValue is the run context the loop hands every session call.
type runCtxValue struct{ name string }

// run runs the loop once.
func (w *world) run(ctx context.Context, in runIn) runOut {
	cp := in.cp
	if cp == nil {
		cp = runstate.New()
	}
	out := runOut{cp: cp}
	l := &loop{w: w, ctx: session.WithRunContext(ctx, runCtxValue{"scenario"}), cp: cp, in: in, out: &out}
	if in.cp == nil {
		out.err = l.start()
	} else {
		out.err = l.resume()
	}
	if !out.done && out.err == nil && cp.Step.Kind == runstate.StepInterruption {
		out.pending = slices.Clone(cp.Step.PendingCallIDs)
	}
	out.snapshot = cp.Clone()
	return out
}

func (l *loop) s() session.Session { return l.in.s }

func (l *loop) start() error {
	history := []session.Item{}
	if s := l.s(); s != nil {
		h, err := session.All(l.ctx, s)
		if err != nil {
			return err
		}
		history = h
	}
	l.w.inputs = append(l.w.inputs, append(slices.Clone(history), l.in.input...))
	if s := l.s(); s != nil && len(l.in.input) > 0 {
		if _, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{Input: l.in.input}); err != nil {
			return err
		}
	}
	return l.turns()
}

func (l *loop) resume() error {
	if !misused("skip-entry-resume") {
		if _, err := l.cp.Resume(l.ctx, l.s()); err != nil {
			return err
		}
	}
	if s := l.s(); s != nil && len(l.in.input) > 0 {
		// Late input lands after the pending write settled.
		if _, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{Input: l.in.input}); err != nil {
			return err
		}
	}
	switch l.cp.Step.Kind {
	case runstate.StepInterruption:
		return l.resolve()
	case runstate.StepRunAgain:
		return l.turns()
	}
	return errNothingToRun
}

func (l *loop) turn() (turnData, error) {
	var td turnData
	raw, ok := l.cp.Field(turnMember)
	if !ok {
		return td, errors.New("scenario: the checkpoint lost its turn")
	}
	err := json.Unmarshal(raw, &td)
	return td, err
}

func (l *loop) setTurn(td turnData) error {
	raw, err := json.Marshal(td)
	if err != nil {
		return err
	}
	return l.cp.SetField(turnMember, raw)
}

func (l *loop) parkOptions(responseID string) runstate.ParkOptions {
	return runstate.ParkOptions{Policy: l.in.agent.policy, ResponseID: &responseID, Store: l.in.agent.store}
}

// turns runs model turns until a final output, an interruption, an
// after-turn cancel or the max-turns handler.
func (l *loop) turns() error {
	a := l.in.agent
	for {
		if a.maxCalls > 0 && l.calls >= a.maxCalls {
			return l.maxTurns()
		}
		l.cp.StartTurn()
		resp, err := l.w.respond()
		if err != nil {
			return err
		}
		l.calls++
		if err := l.setTurn(turnData{ResponseID: resp.id, Items: resp.items}); err != nil {
			return err
		}
		var calls, approvals []session.Item
		for _, it := range resp.items {
			if it.Type() == "function_call" {
				calls = append(calls, it)
				if l.tool(it).approval {
					approvals = append(approvals, it)
				}
			}
		}
		if len(approvals) > 0 {
			l.cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: callIDs(approvals)}
			return l.park(resp)
		}
		items := slices.Clone(resp.items)
		final, stop := "", false
		for _, call := range calls {
			out := l.w.execute(call)
			items = append(items, out)
			if name, _ := call.StringField("name"); !stop && a.stops(name) {
				final, stop = outputText(out), true
			}
		}
		if len(calls) > 0 && !stop {
			if s := l.s(); s != nil {
				if _, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{NewItems: items, Slice: true, Policy: a.policy, ResponseID: resp.id, Store: a.store}); err != nil {
					return err
				}
			}
			l.cp.SetStep(runstate.StepRunAgain)
			if l.in.cancelAfterTurn {
				return nil
			}
			continue
		}
		if !stop {
			final = messageText(resp.items)
		}
		return l.finish(items, resp.id, final)
	}
}

func (l *loop) tool(call session.Item) toolSpec {
	name, _ := call.StringField("name")
	return l.w.tools[name]
}

// park handles a fresh interruption: withheld when the deferral gate is
// on, saved now otherwise.
func (l *loop) park(resp response) error {
	a := l.in.agent
	if a.defers() {
		return l.cp.Park(l.s(), resp.items, l.parkOptions(resp.id))
	}
	if s := l.s(); s != nil {
		_, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{NewItems: resp.items, Slice: true, Policy: a.policy, ResponseID: resp.id, Store: a.store})
		return err
	}
	return nil
}

func (l *loop) guardrails() error {
	switch l.in.agent.guard {
	case guardTrip:
		return errTripwire
	case guardCrash:
		return errGuardrailCrash
	}
	return nil
}

// finish is a fresh turn's final output.
func (l *loop) finish(items []session.Item, responseID, final string) error {
	// The step becomes final only once the guardrails let the output
	// through: a run that raises before stays resumable.
	a := l.in.agent
	s := l.s()
	if s == nil {
		err := l.cp.DiscardHeldAfter(l.ctx, func(context.Context) error { return l.guardrails() })
		if errors.Is(err, errTripwire) {
			l.cp.DiscardHeld()
		}
		if err != nil {
			return err
		}
		l.cp.SetStep(runstate.StepFinalOutput)
	} else {
		if err := l.guardrails(); err != nil {
			if errors.Is(err, errTripwire) {
				l.cp.DiscardHeld()
			}
			return err
		}
		l.cp.SetStep(runstate.StepFinalOutput)
		if l.cp.HasHeld() {
			held := l.cp.TakeHeld()
			rest := items[min(l.cp.PersistedCount, len(items)):]
			if _, err := l.cp.SaveResumedTurn(l.ctx, s, runstate.ResumedTurn{Items: rest, Held: held, Policy: a.policy, ResponseID: responseID, Store: a.store}); err != nil {
				return err
			}
		} else if _, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{NewItems: items, Slice: true, Policy: a.policy, ResponseID: responseID, Store: a.store}); err != nil {
			return err
		}
	}
	l.out.final, l.out.done = final, true
	return nil
}

// maxTurns runs the max-turns handler: its output ends the run, and only
// then is a standing held batch discarded.
func (l *loop) maxTurns() error {
	h := l.in.agent.onMaxTurns
	if h == nil {
		return errMaxTurns
	}
	output, verr := h()
	if err := l.cp.DiscardHeldAfter(l.ctx, func(context.Context) error { return verr }); err != nil {
		return err
	}
	l.cp.SetStep(runstate.StepFinalOutput)
	l.out.final, l.out.done = output, true
	return nil
}

// resolve is the resumed interrupted turn.
func (l *loop) resolve() error {
	a := l.in.agent
	s := l.s()
	if a.guard != guardNone {
		if err := l.cp.CheckOutputGuardrailGate(runstate.Gate{
			OutputGuardrails: true,
			Deferral:         a.defers(),
			BoundaryProven:   true,
			SessionAttached:  s != nil,
		}); err != nil {
			return err
		}
	}
	td, err := l.turn()
	if err != nil {
		return err
	}
	var resolved []session.Item
	var still []string
	final, stop := "", false
	for _, id := range l.cp.Step.PendingCallIDs {
		call, ok := findCall(td.Items, id)
		if !ok {
			return fmt.Errorf("scenario: pending call %s is not in the turn", id)
		}
		var out session.Item
		switch {
		case slices.Contains(l.in.approve, id):
			out = l.w.execute(call)
			if name, _ := call.StringField("name"); !stop && a.stops(name) {
				final, stop = outputText(out), true
			}
		case slices.Contains(l.in.reject, id):
			out = outputItem(id, rejectionText)
		default:
			still = append(still, id)
			continue
		}
		resolved = append(resolved, out)
		// The output committer folds each committed output into a standing
		// held batch, so a later failure cannot lose the executed call.
		if err := l.fold([]session.Item{out}); err != nil {
			return err
		}
	}
	handoff := false
	if len(still) == 0 {
		for _, it := range td.Items {
			if it.Type() == "function_call" && l.tool(it).handoff {
				resolved = append(resolved, outputItem(it.CallID(), `{"assistant":"target"}`))
				handoff = true
			}
		}
	}
	if handoff && a.filter != nil {
		resolved = a.filter(resolved)
	}
	td.Outputs = append(td.Outputs, resolved...)
	if err := l.setTurn(td); err != nil {
		return err
	}
	switch {
	case len(still) > 0:
		l.cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: still}
		if a.defers() {
			return l.cp.Park(s, resolved, l.parkOptions(td.ResponseID))
		}
		if s != nil {
			held := l.cp.TakeHeld()
			_, err := l.cp.SaveResumedTurn(l.ctx, s, runstate.ResumedTurn{Items: resolved, Held: held, Policy: a.policy, ResponseID: td.ResponseID, Store: a.store})
			return err
		}
		return nil
	case stop && !handoff:
		return l.finishResumed(td, resolved, final)
	}
	l.cp.SetStep(runstate.StepRunAgain)
	if s != nil {
		if err := l.exit(s, resolved, td.ResponseID); err != nil {
			return err
		}
	} else if err := l.holdExit(resolved); err != nil {
		// A detached exit folds the resolved items into the standing batch
		// and applies the filter's view to it.
		return err
	}
	if l.in.cancelAfterTurn {
		return nil
	}
	return l.turns()
}

// exit settles the held batch with the resolved turn at a run-again exit.
func (l *loop) exit(s session.Session, resolved []session.Item, responseID string) error {
	a := l.in.agent
	held := l.cp.TakeHeld()
	switch {
	case misused("drop-held"):
		held = nil
	case misused("unregistered-exit"):
		_, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{Input: held, NewItems: resolved, Policy: a.policy, ResponseID: responseID, Store: a.store})
		return err
	}
	_, err := l.cp.SaveResumedTurn(l.ctx, s, runstate.ResumedTurn{Items: resolved, Held: held, Policy: a.policy, ResponseID: responseID, Store: a.store})
	return err
}

// fold folds committed outputs into a standing held batch.
func (l *loop) fold(items []session.Item) error {
	if misused("no-fold") {
		return nil
	}
	return l.cp.ExtendHeld(items)
}

// holdExit is a detached exit: the resolved turn (as the handoff filter
// left it) goes into the standing batch, withdrawing what the filter
// removed.
func (l *loop) holdExit(resolved []session.Item) error {
	if misused("no-fold") {
		return nil
	}
	return l.cp.HoldResumedTurn(resolved)
}

// loopMisuse makes the loop misuse the runstate API on purpose, for the
// package's self-test that proves the scenarios catch a wrong loop: ""
// (none), "skip-entry-resume", "drop-held", "no-fold", "unregistered-exit".
var loopMisuse string

func misused(name string) bool { return loopMisuse == name }

// finishResumed is a final output on the resumed turn (a stopping tool).
func (l *loop) finishResumed(td turnData, resolved []session.Item, final string) error {
	a := l.in.agent
	s := l.s()
	gerr := l.guardrails()
	if errors.Is(gerr, errTripwire) {
		// The blocked outcome is decided: discard the batch, persist only
		// the sanitised rebuild.
		l.cp.SetStep(runstate.StepFinalOutput)
		l.cp.DiscardHeld()
		if s != nil {
			if _, err := l.cp.Save(l.ctx, s, runstate.SaveArgs{NewItems: sanitized(td), Slice: true, Policy: a.policy, ResponseID: td.ResponseID, Store: a.store}); err != nil {
				return err
			}
		}
		return gerr
	}
	if s == nil {
		if err := l.cp.DiscardHeldAfter(l.ctx, func(context.Context) error { return gerr }); err != nil {
			// The tools ran and their outputs are folded into the batch:
			// a retry continues with the model, never re-runs a tool.
			l.cp.SetStep(runstate.StepRunAgain)
			return err
		}
		l.cp.SetStep(runstate.StepFinalOutput)
		l.out.final, l.out.done = final, true
		return nil
	}
	// The final sweep (or the crash path's save) settles with a final step:
	// a failure mid-settle fails closed.
	l.cp.SetStep(runstate.StepFinalOutput)
	items := resolved
	if gerr == nil && a.guard != guardNone {
		// The guarded final sweep rebuilds the current response.
		all := append(slices.Clone(td.Items), td.Outputs...)
		items = all[min(l.cp.PersistedCount, len(all)):]
	}
	// A guardrail crash still claims and persists the parked pair.
	held := l.cp.TakeHeld()
	if _, err := l.cp.SaveResumedTurn(l.ctx, s, runstate.ResumedTurn{Items: items, Held: held, Policy: a.policy, ResponseID: td.ResponseID, Store: a.store}); err != nil {
		return err
	}
	if gerr != nil {
		return gerr
	}
	l.out.final, l.out.done = final, true
	return nil
}

// sanitized is the tripwire rebuild: data-free calls and withheld outputs,
// nothing else of the blocked response.
func sanitized(td turnData) []session.Item {
	var out []session.Item
	for _, it := range td.Items {
		if it.Type() == "function_call" {
			name, _ := it.StringField("name")
			out = append(out, callItem(it.CallID(), name, "{}"))
		}
	}
	for _, it := range td.Outputs {
		if it.Type() == "function_call_output" {
			out = append(out, outputItem(it.CallID(), withheldText))
		}
	}
	return out
}

func findCall(items []session.Item, id string) (session.Item, bool) {
	for _, it := range items {
		if it.Type() == "function_call" && it.CallID() == id {
			return it, true
		}
	}
	return session.Item{}, false
}

func callIDs(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.CallID()
	}
	return out
}

func outputText(it session.Item) string { s, _ := it.StringField("output"); return s }

func messageText(items []session.Item) string {
	for _, it := range items {
		if it.Role() == "assistant" {
			var m struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if json.Unmarshal(it.Bytes(), &m) == nil && len(m.Content) > 0 {
				return m.Content[0].Text
			}
		}
	}
	return ""
}

// Item builders.

func jstr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The builders write items in canonical form (sorted keys, compact), the
// form a checkpoint's JSON round trip gives them (Python writes RunState
// with json.dumps(sort_keys=True)), so both modes expect the same bytes.

func userItem(text string) session.Item {
	return session.MustItem(`{"content":` + jstr(text) + `,"role":"user","type":"message"}`)
}

func assistantItem(text string) session.Item {
	return session.MustItem(`{"content":[{"text":` + jstr(text) + `,"type":"output_text"}],"role":"assistant","type":"message"}`)
}

func callItem(id, name, args string) session.Item {
	return session.MustItem(`{"arguments":` + jstr(args) + `,"call_id":` + jstr(id) + `,"name":` + jstr(name) + `,"type":"function_call"}`)
}

func outputItem(id, output string) session.Item {
	return session.MustItem(`{"call_id":` + jstr(id) + `,"output":` + jstr(output) + `,"type":"function_call_output"}`)
}

// call is a call of tool name with the scenarios' usual arguments.
func call(id, name string) session.Item { return callItem(id, name, `{"query":"x"}`) }

// executed is the output the world's tool registry gives call id of name.
func executed(id, name string) session.Item { return outputItem(id, name+":"+id) }

// Modes.

// scMode is how a scenario carries its checkpoint between steps.
type scMode string

const (
	modeLive   scMode = "live"   // the same *Checkpoint across steps
	modeJSON   scMode = "json"   // json.Marshal + runstate.Load after every step
	modeStored scMode = "stored" // saved to the store's checkpoints and loaded back after every step
)

// scModes are the modes every scenario runs in.
var scModes = []scMode{modeLive, modeJSON, modeStored}

// needs is the capability a mode's clauses need.
func (m scMode) needs() session.Capability {
	if m == modeStored {
		return session.CapCheckpoints
	}
	return 0
}

// sc is one scenario run in one mode.
type sc struct {
	*suite.C
	mode scMode

	store  session.CheckpointStore            // modeStored: where checkpoints are kept
	stored map[*runstate.Checkpoint]storedRef // modeStored: each checkpoint handed out, by lineage
}

// lineages numbers the stored lineages of the process, so that the cells
// of one clause (each with an sc of its own) never share a name.
var lineages atomic.Int64

// storedRef is where a checkpoint's lineage is kept and its version then.
type storedRef struct {
	name    string
	version int64
}

// carry returns the checkpoint the next step uses: cp itself (live) or cp
// after a JSON round trip.
func (x *sc) carry(cp *runstate.Checkpoint) *runstate.Checkpoint {
	x.Helper()
	switch {
	case x.mode == modeLive || cp == nil:
		return cp
	case x.mode == modeStored:
		return x.storeTrip(cp)
	}
	return roundTrip(x, cp)
}

// storeTrip saves cp under the version it loaded with (so a stale save
// would fail) in a probe session's checkpoints, loads it back and reloads
// it: the bytes the store returns are the bytes saved.
func (x *sc) storeTrip(cp *runstate.Checkpoint) *runstate.Checkpoint {
	x.Helper()
	if x.store == nil {
		cs, ok := x.Fresh("checkpoints").(session.CheckpointStore)
		require.True(x, ok, "the store declares checkpoints but its sessions are no session.CheckpointStore")
		x.store = cs
	}
	// A checkpoint this mode handed out continues its lineage (the loop
	// changed it in place); any other starts one.
	ref, ok := x.stored[cp]
	if !ok {
		ref = storedRef{name: fmt.Sprintf("run-%d", lineages.Add(1))}
	}
	doc, err := cp.MarshalJSON()
	require.NoError(x, err, "marshal the checkpoint")
	v, err := x.store.SaveCheckpoint(x.Context(), ref.name, doc, ref.version)
	require.NoError(x, err, "save checkpoint %s at version %d", ref.name, ref.version)
	require.Greater(x, v, ref.version, "a save advances the version")
	got, gv, err := x.store.LoadCheckpoint(x.Context(), ref.name)
	require.NoError(x, err, "load the checkpoint")
	require.Equal(x, v, gv, "the version saved is the version loaded")
	require.Equal(x, string(doc), string(got), "the store keeps the document byte for byte")
	if ref.version > 0 {
		_, err := x.store.SaveCheckpoint(x.Context(), ref.name, doc, ref.version)
		require.ErrorIs(x, err, session.ErrCheckpointConflict, "a save from the stale version fails")
	}
	back, err := runstate.Load(got)
	require.NoError(x, err, "reload the checkpoint: %s", got)
	if x.stored == nil {
		x.stored = map[*runstate.Checkpoint]storedRef{}
	}
	x.stored[back] = storedRef{name: ref.name, version: v}
	return back
}

// roundTrip marshals cp with encoding/json and reloads it with Load.
func roundTrip(t require.TestingT, cp *runstate.Checkpoint) *runstate.Checkpoint {
	b, err := json.Marshal(cp)
	require.NoError(t, err, "marshal the checkpoint")
	back, err := runstate.Load(b)
	require.NoError(t, err, "reload the checkpoint: %s", b)
	return back
}

// step runs the loop once and carries the checkpoint per the mode.
func (x *sc) step(w *world, in runIn) runOut {
	x.Helper()
	out := w.run(x.Context(), in)
	out.cp = x.carry(out.cp)
	return out
}

// Assertions.

// assertPaired fails on any tool output without an earlier call of the
// mapped type, and on any call or output that appears twice.
func assertPaired(t require.TestingT, items []session.Item) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	calls := map[history.PairKey]int{}
	outputs := map[history.PairKey]int{}
	for i, it := range items {
		if k, ok := history.CallKey(it); ok {
			calls[k]++
			require.Equal(t, 1, calls[k], "call %v appears twice (item %d)", k, i)
		}
		if k, ok := history.AnsweredKey(it); ok {
			require.Positive(t, calls[k], "output %d (%s) has no earlier call %v", i, it, k)
			outputs[k]++
			require.Equal(t, 1, outputs[k], "output for %v appears twice (item %d)", k, i)
		}
	}
}

// requireHistory asserts the session holds exactly want, pairs every
// output with an earlier call and holds nothing twice.
func requireHistory(t require.TestingT, ctx context.Context, s session.Session, want []session.Item, msgAndArgs ...any) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	got, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Equal(t, suite.Texts(want), suite.Texts(got), msgAndArgs...)
	assertPaired(t, got)
}

// requireRuns asserts exactly how often each tool call executed.
func requireRuns(t require.TestingT, w *world, want map[string]int) {
	got := map[string]int{}
	for id, n := range w.runs {
		if n != 0 {
			got[id] = n
		}
	}
	clean := map[string]int{}
	for id, n := range want {
		if n != 0 {
			clean[id] = n
		}
	}
	require.Equal(t, clean, got, "tool executions per call id")
}

// requireNoRecord asserts a checkpoint (and its JSON) carries no pending
// write.
func requireNoRecord(t require.TestingT, cp *runstate.Checkpoint, what string) {
	require.Nil(t, cp.Pending, "%s: no pending write may remain", what)
	b, err := json.Marshal(cp)
	require.NoError(t, err)
	require.NotContains(t, string(b), "pending_session_write", "%s: the JSON carries no pending write", what)
}

// requireHeld asserts a held record standing with exactly items.
func requireHeld(t require.TestingT, cp *runstate.Checkpoint, items []session.Item, what string) {
	require.NotNil(t, cp.Pending, "%s: a held record must stand", what)
	require.True(t, cp.Pending.Held, "%s: the record must be held", what)
	require.Nil(t, cp.Pending.Before, "%s: a held record has no before digests", what)
	require.Equal(t, suite.Texts(items), suite.Texts(cp.Pending.Items), "%s: held batch", what)
}

// requireOrdinary asserts an ordinary record standing with exactly items.
func requireOrdinary(t require.TestingT, cp *runstate.Checkpoint, items []session.Item, what string) {
	require.NotNil(t, cp.Pending, "%s: an ordinary record must stand", what)
	require.False(t, cp.Pending.Held, "%s: the record must be ordinary", what)
	require.Equal(t, suite.Texts(items), suite.Texts(cp.Pending.Items), "%s: recorded batch", what)
}

// Registration.

// scenario is one run-state scenario; it runs once per mode.
type scenario struct {
	name string
	spec string // the spec items it covers
	run  func(x *sc)
}

func registerScenarios(list ...scenario) {
	for _, s := range list {
		for _, m := range scModes {
			s, m := s, m
			name := "held-write/" + s.name + "/" + string(m)
			register(suite.Clause{Name: name, Group: Group, Needs: m.needs(), Run: func(c *suite.C) { s.run(&sc{C: c, mode: m}) }})
		}
	}
}
