package history_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// A reasoning model's conversation: each response starts with a reasoning
// item. A window of 5 would start on msg_1 without its reasoning item and
// a window of 2 on fc_1 without rs_2; the API rejects both, so ModelInput
// starts them later instead. The Python SDK's internal key on fc_1 is
// stripped on the way out; the session keeps it.
func ExampleModelInput() {
	ctx := context.Background()
	s, _ := memory.NewSession("conv-1")
	items, _ := session.ParseItems(
		`{"role":"user","content":"hi"}`,
		`{"type":"reasoning","id":"rs_1","summary":[]}`,
		`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hello."}]}`,
		`{"role":"user","content":"weather in Paris?"}`,
		`{"type":"reasoning","id":"rs_2","summary":[]}`,
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}","_agents_tool_title":"Weather"}`,
		`{"type":"function_call_output","call_id":"call_1","output":"18C, clear"}`,
	)
	_ = session.Append(ctx, s, items)

	for _, n := range []int{history.All, 5, 2} {
		input, err := history.ModelInput(ctx, s, n)
		if err != nil {
			panic(err)
		}
		if n == history.All {
			fmt.Print("every item:")
		} else {
			fmt.Printf("window of %d:", n)
		}
		for _, it := range input {
			fmt.Printf(" %s", label(it))
		}
		fmt.Println()
	}
	input, _ := history.ModelInput(ctx, s, 3)
	fmt.Println(input[1])
	// Output:
	// every item: user rs_1 msg_1 user rs_2 fc_1 call_1-output
	// window of 5: user rs_2 fc_1 call_1-output
	// window of 2:
	// {"type":"function_call","id":"fc_1","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"}
}

// label names an item for the examples.
func label(it session.Item) string {
	switch {
	case it.Role() == "user":
		return "user"
	case it.ID() != "":
		return it.ID()
	default:
		return it.CallID() + "-output"
	}
}

// A stored history written by a crashed run: an output whose call was
// never stored, an output stored twice, and a call still awaiting its
// output. Diagnose finds them, RepairHistory drops the severe ones (the
// API rejects every later request over such a history).
func ExampleDiagnose() {
	items, _ := session.ParseItems(
		`{"role":"user","content":"q"}`,
		`{"type":"function_call_output","call_id":"lost","output":"x"}`,
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`,
		`{"type":"local_shell_call","id":"lsc_1","call_id":"b","action":{"type":"exec","command":["ls"],"env":{}}}`,
	)
	for _, p := range history.Diagnose(items) {
		fmt.Printf("item %d: %s %s (severe: %v)\n", p.Index, p.Kind, p.Key.ID, p.Kind.Severe())
	}
	fixed, removed := history.RepairHistory(items, false)
	fmt.Printf("repaired: %d items, %d removed\n", len(fixed), len(removed))
	// Output:
	// item 1: orphan-output lost (severe: true)
	// item 4: duplicate-output a (severe: true)
	// item 5: unanswered-call b (severe: false)
	// repaired: 4 items, 2 removed
}

// A history in memory (as an openai-go user keeps ResponseNewParams.Input)
// gets the same window as a session holding it; an item the API cannot
// take is named, not sent.
func ExampleWindow() {
	items, _ := session.ParseItems(
		`{"role":"user","content":"score it"}`,
		`{"type":"function_call","call_id":"c1","name":"score","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c1","output":{"score":NaN}}`,
	)
	_, err := history.Window(items, history.All)
	var nf *history.NonFiniteError
	if errors.As(err, &nf) {
		fmt.Println(nf.Index, nf.Type, nf.ID, nf.Path, nf.Token)
	}
	input, _ := history.Window(items[:2], history.All)
	fmt.Println(len(input), "item: the call has no output yet")
	// Output:
	// 2 function_call_output c1 output.score NaN
	// 1 item: the call has no output yet
}
