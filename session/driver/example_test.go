package driver_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// An adapter's read: the rows a backend returned for the newest three
// records, newest first, decoded through one Decoder; the unreadable row is
// reported, kept out of the result and never deleted.
func ExampleDecoder() {
	rows := []string{ // as the backend returned them, newest first
		`{"type":"function_call_output","call_id":"c1","output":"18°C"}`,
		`{"type":"function_call","call_id":"c1","name":"weather"`, // cut short
		`{"role":"user","content":"Weather in Paris?"}`,
	}
	var log driver.CorruptLog
	report := log.Handler()

	var dec driver.Decoder
	dec.Expect(len(rows))
	var items []session.Item
	for i, row := range rows {
		it, err := dec.DecodeString(row)
		if err != nil {
			report.Report(context.Background(), driver.CorruptRecord{
				SessionID: "s1", Position: "newest-" + strconv.Itoa(i), Raw: []byte(row), Err: err})
			continue
		}
		items = append(items, it)
	}
	for i := len(items) - 1; i >= 0; i-- { // oldest first
		fmt.Printf("type=%q role=%q call_id=%q\n", items[i].Type(), items[i].Role(), items[i].CallID())
	}
	for _, r := range log.Reports("s1") {
		fmt.Println("unreadable:", r.Position)
	}
	// Output:
	// type="" role="user" call_id=""
	// type="function_call_output" role="" call_id="c1"
	// unreadable: newest-1
}
