package runstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// An agent with output guardrails asks for approval of a tool call. The
// call is withheld from the Session (the guardrails have not yet approved
// the response) and parked on the checkpoint; after approval the resumed
// run executes the tool and settles call and output in one ordered append.
func Example() {
	ctx := context.Background()
	s, _ := memory.NewSession("conv-1")
	_ = session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"write it"}`)})

	// Turn 1 ends in an approval interruption: park the withheld call.
	cp := runstate.New()
	cp.SetStep(runstate.StepInterruption)
	call := session.MustItem(`{"type":"function_call","call_id":"c1","name":"write_thing","arguments":"{}"}`)
	if runstate.ShouldDefer(true, "stop_on_first_tool") {
		_ = cp.Park(s, []session.Item{call}, runstate.ParkOptions{ResponseID: ptrTo("resp_1")})
	}
	checkpoint, _ := cp.MarshalJSON() // the application stores this

	// Later, possibly in another process: load, resume, execute, settle.
	cp, err := runstate.Load(checkpoint)
	if err != nil {
		panic(err)
	}
	if _, err := cp.Resume(ctx, s); err != nil { // interruption: the batch rides
		panic(err)
	}
	output := session.MustItem(`{"type":"function_call_output","call_id":"c1","output":"wrote"}`)
	held := cp.TakeHeld()
	cp.SetStep(runstate.StepRunAgain)
	if _, err := cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: []session.Item{output}, Held: held, ResponseID: "resp_2"}); err != nil {
		panic(err)
	}

	// The parked call rode the checkpoint, written in Python's sorted-key
	// layout; the output comes straight from the tool.
	history, _ := session.All(ctx, s)
	for _, it := range history {
		fmt.Println(it)
	}
	fmt.Println("persisted this turn:", cp.PersistedCount, "pending write:", cp.Pending != nil)
	// Output:
	// {"role":"user","content":"write it"}
	// {"arguments":"{}","call_id":"c1","name":"write_thing","type":"function_call"}
	// {"type":"function_call_output","call_id":"c1","output":"wrote"}
	// persisted this turn: 2 pending write: false
}

// Every exit of the held write. An approval interruption under the
// output-guardrail gate parks calls c1 and c2 (Park); the application
// stores the checkpoint; a later resume loads it and calls Resume before
// any model call or tool. The batch then leaves the checkpoint through
// exactly one exit:
//
//   - attached: the approved tools run, the output committer folds each
//     output (ExtendHeld), and the exit claims the batch (TakeHeld) and
//     settles it ahead of the resolved turn (SaveResumedTurn). A handoff
//     filter that dropped c2's output withdraws it, with its call;
//   - detached: with no session the exit applies the same filter view to
//     the batch on the checkpoint (HoldResumedTurn): c2's output goes, its
//     call stays in the record as Python's stays; the reattach, a
//     run-again resume with the session, settles it at entry (Resume) and
//     drops the unpaired call;
//   - tripwire: an output guardrail blocks the response; the batch is
//     discarded at once (DiscardHeld) and only the sanitised rebuild is
//     saved;
//   - completion without a session (or a max-turns handler's output): the
//     batch is discarded only once the exit succeeded (DiscardHeldAfter).
func Example_heldWriteExits() {
	ctx := context.Background()
	c1, c2 := fnCall("c1"), fnCall("c2")
	o1, o2 := fnOutput("c1", "wrote"), fnOutput("c2", "wrote")

	// park runs turn 1 on s and returns the stored checkpoint.
	park := func(s session.Session) []byte {
		cp := runstate.New()
		cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c1", "c2"}}
		must(cp.Park(s, []session.Item{c1, c2}, runstate.ParkOptions{ResponseID: ptrTo("resp_1")}))
		return must1(cp.MarshalJSON())
	}
	// resume loads a stored checkpoint and settles at resume entry; s is
	// nil for a detached resume.
	resume := func(doc []byte, s session.Session) *runstate.Checkpoint {
		cp := must1(runstate.Load(doc))
		must1(cp.Resume(ctx, s))
		return cp
	}
	// runTools executes the approved calls: each output commits and is
	// folded into the batch; the turn resolves into run-again.
	runTools := func(cp *runstate.Checkpoint) {
		must(cp.ExtendHeld([]session.Item{o1}))
		must(cp.ExtendHeld([]session.Item{o2}))
		cp.SetStep(runstate.StepRunAgain)
	}
	view := []session.Item{o1} // the handoff filter dropped c2's output

	s := newSession("attached")
	cp := resume(park(s), s)
	runTools(cp)
	must1(cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: view, Held: cp.TakeHeld(), ResponseID: "resp_2"}))
	show("attached exit", s, cp)

	s = newSession("detached")
	cp = resume(park(s), nil)
	runTools(cp)
	must(cp.HoldResumedTurn(view))
	show("detached exit", s, cp)
	cp = resume(must1(cp.MarshalJSON()), s) // the reattach
	show("entry settle", s, cp)

	s = newSession("tripwire")
	cp = resume(park(s), s)
	runTools(cp)
	cp.SetStep(runstate.StepFinalOutput)
	cp.DiscardHeld() // the blocked outcome is decided
	rebuild := []session.Item{
		session.MustItem(`{"type":"function_call","call_id":"c1","name":"write_thing","arguments":""}`),
		fnOutput("c1", "Output withheld by an output guardrail."),
	}
	must1(cp.Save(ctx, s, runstate.SaveArgs{NewItems: rebuild, Slice: true}))
	show("tripwire", s, cp)

	s = newSession("completion")
	cp = resume(park(s), nil)
	runTools(cp)
	err := cp.DiscardHeldAfter(ctx, func(context.Context) error { return errors.New("final save failed") })
	fmt.Println("failed completion:", err)
	show("failed completion", s, cp)
	must(cp.DiscardHeldAfter(ctx, func(context.Context) error { return nil }))
	show("completion", s, cp)

	// Output:
	// attached exit: session [user function_call:c1 function_call_output:c1]; record none
	// detached exit: session [user]; record held [function_call:c1 function_call:c2 function_call_output:c1] (1.18)
	// entry settle: session [user function_call:c1 function_call_output:c1]; record none
	// tripwire: session [user function_call:c1 function_call_output:c1]; record none
	// failed completion: final save failed
	// failed completion: session [user]; record held [function_call:c1 function_call:c2 function_call_output:c1 function_call_output:c2] (1.18)
	// completion: session [user]; record none
}

func fnCall(id string) session.Item {
	return session.MustItem(`{"type":"function_call","call_id":"` + id + `","name":"write_thing","arguments":"{}"}`)
}

func fnOutput(id, text string) session.Item {
	return session.MustItem(`{"type":"function_call_output","call_id":"` + id + `","output":"` + text + `"}`)
}

// newSession returns a memory session holding the run's input, which is
// persisted eagerly even when the turn's items are withheld.
func newSession(id string) session.Session {
	s := must1(memory.NewSession(id))
	must(session.Append(context.Background(), s, []session.Item{session.MustItem(`{"role":"user","content":"write both"}`)}))
	return s
}

// show prints the session's items and the record the checkpoint carries.
func show(exit string, s session.Session, cp *runstate.Checkpoint) {
	record := "none"
	if cp.HasHeld() {
		var label struct {
			Schema string `json:"$schemaVersion"`
		}
		doc := must1(cp.MarshalJSON())
		must(json.Unmarshal(doc, &label))
		record = "held [" + kinds(cp.Pending.Items) + "] (" + label.Schema + ")"
	} else if cp.Pending != nil {
		record = "ordinary [" + kinds(cp.Pending.Items) + "]"
	}
	fmt.Printf("%s: session [%s]; record %s\n", exit, kinds(must1(session.All(context.Background(), s))), record)
}

// kinds names each item by its role, or its type and call id.
func kinds(items []session.Item) string {
	var out []string
	for _, it := range items {
		if r := it.Role(); r != "" {
			out = append(out, r)
			continue
		}
		out = append(out, it.Type()+":"+it.CallID())
	}
	return strings.Join(out, " ")
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func must1[T any](v T, err error) T {
	must(err)
	return v
}

func ptrTo[T any](v T) *T { return &v }
