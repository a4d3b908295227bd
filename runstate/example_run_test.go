package runstate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The approval flow, crash-safe. The agent has output guardrails, so the
// turn that asks for approval is withheld from the session and rides the
// checkpoint, which the Run keeps in the same SQLite file. The first
// process exits while a human decides; the second approves, runs the tool
// and settles call and output in one ordered append.
func ExampleRun() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "approval")
	defer os.RemoveAll(dir)
	url := "sqlite://" + filepath.Join(dir, "agent.db")
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
	call := session.MustItem(`{"type":"function_call","call_id":"c1","name":"delete_account","arguments":"{}"}`)

	// Process 1: the user asks, the model calls a tool that needs approval.
	store, _ := adapters.Open(ctx, url)
	s, _ := store.Session("conv-1")
	run, _ := runstate.Open(ctx, s, opts)
	_ = run.Input(ctx, session.MustItem(`{"role":"user","content":"delete my account"}`))
	_ = run.Interrupt(ctx, "resp_1", []session.Item{call}, "c1")
	_ = store.Close() // the process exits

	// Process 2: recovery first, then the approved tool runs and the turn settles.
	store, _ = adapters.Open(ctx, url)
	defer store.Close()
	s, _ = store.Session("conv-1")
	run, err := runstate.Open(ctx, s, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println("next:", run.Next().Kind, run.Next().CallIDs)
	for _, id := range run.Awaiting() {
		if err := run.Claim(ctx, id); err != nil { // before the tool runs
			panic(err) // another process claimed it: its tool must not run here
		}
		_ = run.Output(ctx, session.MustItem(`{"type":"function_call_output","call_id":"`+id+`","output":"deleted"}`))
	}
	if err := run.Settle(ctx); err != nil {
		panic(err)
	}

	items, _ := session.All(ctx, s)
	for _, it := range items {
		fmt.Println(it)
	}
	fmt.Println("awaiting:", run.Awaiting())
	fmt.Println("next:", run.Next().Kind, run.Next().ResponseID)
	// Output:
	// next: approval [c1]
	// {"role":"user","content":"delete my account"}
	// {"arguments":"{}","call_id":"c1","name":"delete_account","type":"function_call"}
	// {"type":"function_call_output","call_id":"c1","output":"deleted"}
	// awaiting: []
	// next: model resp_1
}

// A process claimed an approved call and died inside the tool. The next
// process is not offered the call again: it finds it in doubt, asks the
// tool's system what happened under the call id, and records that.
func ExampleRun_InDoubt() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "in-doubt")
	defer os.RemoveAll(dir)
	url := "sqlite://" + filepath.Join(dir, "agent.db")
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
	call := session.MustItem(`{"type":"function_call","call_id":"c1","name":"transfer","arguments":"{\"eur\":100}"}`)

	store, _ := adapters.Open(ctx, url)
	s, _ := store.Session("conv-2")
	run, _ := runstate.Open(ctx, s, opts)
	_ = run.Input(ctx, session.MustItem(`{"role":"user","content":"send 100 EUR to bob"}`))
	_ = run.Interrupt(ctx, "resp_1", []session.Item{call}, "c1")
	_ = run.Claim(ctx, "c1") // approved; the transfer starts...
	_ = store.Close()        // ...and the process dies inside it

	store, _ = adapters.Open(ctx, url)
	defer store.Close()
	s, _ = store.Session("conv-2")
	run, _ = runstate.Open(ctx, s, opts)
	fmt.Println("awaiting:", run.Awaiting(), "in doubt:", run.InDoubt())
	fmt.Println("next:", run.Next().Kind, run.Next().CallIDs)
	// The bank knows transfer c1: it went through. Record that.
	_ = run.Output(ctx, session.MustItem(`{"type":"function_call_output","call_id":"c1","output":"sent (found by call id)"}`))
	_ = run.Settle(ctx)
	fmt.Println("next:", run.Next().Kind)
	// Output:
	// awaiting: [] in doubt: [c1]
	// next: resolve [c1]
	// next: model
}
