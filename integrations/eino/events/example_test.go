package events_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/integrations/eino/events"
)

// A Runner in session mode over an SQLite file: the second process, a new
// Runner over the store opened anew, continues the conversation the first
// one left in the file.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "eino-events-example")
	defer os.RemoveAll(dir)
	url := "sqlite://" + filepath.Join(dir, "sessions.db")
	// The Runner keeps an interrupt's checkpoint in its CheckPointStore: in
	// a real deployment one that outlives the process (any
	// adk.CheckPointStore); here a map the two "processes" share.
	cps := newCheckpoints()

	process := func(question string) {
		st, err := adapters.Open(ctx, url)
		if err != nil {
			panic(err)
		}
		defer st.Close()
		evs, err := events.New[*schema.Message](st, events.Options{Prefix: "eino:"})
		if err != nil {
			panic(err)
		}
		agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "echo", Description: "echoes", Model: echo{}})
		if err != nil {
			panic(err)
		}
		runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, SessionID: "conv-42", SessionStore: evs, CheckPointStore: cps})
		iter := runner.Query(ctx, question)
		for {
			ev, ok := iter.Next()
			if !ok {
				return
			}
			if ev.Err != nil {
				panic(ev.Err)
			}
			if ev.Output != nil && ev.Output.MessageOutput != nil {
				msg, _ := ev.Output.MessageOutput.GetMessage()
				fmt.Println(msg.Content)
			}
		}
	}
	process("hello")
	process("do you remember me?")
	// Output:
	// 1 message in; the last: "hello"
	// 3 messages in; the last: "do you remember me?"
}

// checkpoints is an adk.CheckPointStore and adk.CheckPointDeleter kept in
// memory: a map guarded by a mutex, shared by the "processes" a test or an
// example simulates as they would share a durable store.
type checkpoints struct {
	mu sync.Mutex
	m  map[string][]byte
}

var (
	_ adk.CheckPointStore   = (*checkpoints)(nil)
	_ adk.CheckPointDeleter = (*checkpoints)(nil)
)

func newCheckpoints() *checkpoints { return &checkpoints{m: map[string][]byte{}} }

func (c *checkpoints) Get(_ context.Context, id string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return bytes.Clone(b), ok, nil
}

func (c *checkpoints) Set(_ context.Context, id string, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = bytes.Clone(b)
	return nil
}

func (c *checkpoints) Delete(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
	return nil
}

// echo is a model that says what it was given.
type echo struct{}

func (echo) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	n := fmt.Sprintf("%d messages", len(in))
	if len(in) == 1 {
		n = "1 message"
	}
	return schema.AssistantMessage(fmt.Sprintf("%s in; the last: %q", n, in[len(in)-1].Content), nil), nil
}

func (e echo) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	m, err := e.Generate(ctx, in, opts...)
	return schema.StreamReaderFromArray([]*schema.Message{m}), err
}

// The Store's two operations, as eino's Runner calls them: append a batch
// (refused if an event id is taken by another event), and read after an
// event id, forward or newest first, filtered by kind.
func ExampleNew() {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	if err != nil {
		panic(err)
	}
	defer st.Close()
	store, err := events.New[*schema.Message](st, events.Options{})
	if err != nil {
		panic(err)
	}

	msg := func(id, text string) *adk.SessionEvent[*schema.Message] {
		return &adk.SessionEvent[*schema.Message]{EventID: id, Kind: adk.SessionEventMessage, Message: schema.UserMessage(text)}
	}
	idle := &adk.SessionEvent[*schema.Message]{EventID: "turn-1", Kind: adk.SessionEventSessionStatusIdle,
		Lifecycle: &adk.LifecycleEvent{State: adk.SessionRunStateIdle, StopReason: &adk.StopReason{Type: "end_turn"}}}
	_ = store.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{msg("e1", "one"), msg("e2", "two"), idle})

	err = store.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{msg("e2", "another")})
	fmt.Println(err)
	err = store.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{msg("e1", "one"), msg("e2", "two"), idle})
	fmt.Println("replay:", err)

	res, _ := store.LoadEvents(ctx, "s", &adk.LoadSessionEventsRequest{After: "e1"})
	for _, e := range res.Events {
		fmt.Println(e.EventID, e.Kind)
	}
	res, _ = store.LoadEvents(ctx, "s", &adk.LoadSessionEventsRequest{Reverse: true, Limit: 1, Kinds: []adk.SessionEventKind{adk.SessionEventMessage}})
	fmt.Println(res.Events[0].Message.Content, "next:", res.Next)
	// Output:
	// events: session "s" already has event id "e2", with another event: adk: duplicate session event_id
	// replay: <nil>
	// e2 message
	// turn-1 session.status_idle
	// two next: e2
}
