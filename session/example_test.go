package session_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/session"
)

// A caller uses the package functions: each uses the backend's capability
// when it has one (here memory's LatestReader) and the core interface
// otherwise, with the same result.
func Example() {
	ctx := context.Background()
	s, err := memory.NewSession("conversation-42")
	if err != nil {
		panic(err)
	}
	items, err := session.ParseItems(
		`{"role":"user","content":"Weather in Paris?"}`,
		`{"type":"function_call","call_id":"c1","name":"weather","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"c1","output":"18°C"}`,
	)
	if err != nil {
		panic(err)
	}
	if err := session.Append(ctx, s, items); err != nil {
		panic(err)
	}
	latest, _ := session.Latest(ctx, s, 2)
	fmt.Println("latest 2:", latest[0].Type(), latest[1].Type())
	it, ok, _ := session.Pop(ctx, s)
	fmt.Println("popped:", ok, it)
	all, _ := session.All(ctx, s)
	fmt.Println("left:", len(all), "items")
	fmt.Println("capabilities:", session.Probe(s))

	_, err = session.ParseItems(`{"role":"user"}`, `[1,2]`)
	fmt.Println(err)
	fmt.Println(errors.Is(err, session.ErrInvalidItem))
	// Output:
	// latest 2: function_call function_call_output
	// popped: true {"type":"function_call_output","call_id":"c1","output":"18°C"}
	// left: 2 items
	// capabilities: latest,replace,ttl,checkpoints,checkpoint-commit,versioned-replace,follow,append-once
	// session: item 1 is not a JSON object: not an object
	// true
}

// An operator's rewrite beside live writers: read the version, the
// history, the version again; replace only if nothing changed since.
func ExampleReplaceIf() {
	ctx := context.Background()
	s, _ := memory.NewSession("conversation-42")
	_ = session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"hi"}`)})

	v, _ := session.Version(ctx, s)
	items, _ := session.All(ctx, s)
	if again, _ := session.Version(ctx, s); again != v {
		return // changed while read: start over
	}
	// A writer appends before the rewrite lands...
	_ = session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"still here"}`)})
	err := session.ReplaceIf(ctx, s, v, items[:0])
	fmt.Println(errors.Is(err, session.ErrHistoryChanged))
	all, _ := session.All(ctx, s)
	fmt.Println(len(all), "items: nothing lost")
	// Output:
	// true
	// 2 items: nothing lost
}

// A runtime that keeps the conversation in memory reads only what another
// process appended since its last read; a pop below its cursor is reported,
// and the runtime reads the whole history again.
func ExampleReadSince() {
	ctx := context.Background()
	s, _ := memory.NewSession("conversation-42")
	_ = session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"hi"}`)})

	seen, cursor, _ := session.ReadSince(ctx, s, "") // the zero Cursor: the whole history
	fmt.Println("first read:", len(seen))

	_ = session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"assistant","content":"hello"}`)})
	news, cursor, _ := session.ReadSince(ctx, s, cursor)
	fmt.Println("new:", news[0])
	news, cursor, _ = session.ReadSince(ctx, s, cursor)
	fmt.Println("new:", len(news))

	_, _, _ = session.Pop(ctx, s) // removes the item the cursor names
	_, _, err := session.ReadSince(ctx, s, cursor)
	fmt.Println(errors.Is(err, session.ErrCursorLost))
	// Output:
	// first read: 1
	// new: {"role":"assistant","content":"hello"}
	// new: 0
	// true
}

// An append retried after its outcome was lost (a timeout,
// ErrOutcomeUnknown, a crash) lands once when it carries the same
// operation id.
func ExampleAppendOnce() {
	ctx := context.Background()
	s, _ := memory.NewSession("conversation-42")
	turn := []session.Item{session.MustItem(`{"role":"user","content":"hi"}`)}

	appended, _ := session.AppendOnce(ctx, s, "turn-1", turn)
	fmt.Println("first:", appended)
	appended, _ = session.AppendOnce(ctx, s, "turn-1", turn) // the retry
	fmt.Println("retry:", appended)
	all, _ := session.All(ctx, s)
	fmt.Println(len(all), "item")
	// Output:
	// first: true
	// retry: false
	// 1 item
}
