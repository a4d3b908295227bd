package runstate_test

import (
	"context"
	"fmt"

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
	_, err = cp.SaveResumedTurn(ctx, s, runstate.ResumedTurn{Items: []session.Item{output}, Held: held, ResponseID: "resp_2"})
	n := cp.PersistedCount
	if err != nil {
		panic(err)
	}

	// The parked call rode the checkpoint, written in Python's sorted-key
	// layout; the output comes straight from the tool.
	history, _ := session.All(ctx, s)
	for _, it := range history {
		fmt.Println(it)
	}
	fmt.Println("persisted this turn:", n, "pending write:", cp.Pending != nil)
	// Output:
	// {"role":"user","content":"write it"}
	// {"arguments":"{}","call_id":"c1","name":"write_thing","type":"function_call"}
	// {"type":"function_call_output","call_id":"c1","output":"wrote"}
	// persisted this turn: 2 pending write: false
}

func ptrTo[T any](v T) *T { return &v }
