package genkit_test

import (
	"context"
	"fmt"
	"log"

	"github.com/firebase/genkit/go/ai"
	aix "github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/genkit"
	genkitx "github.com/firebase/genkit/go/genkit/exp"

	"github.com/agentsessions/sessions/adapters"
	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
)

// counterConfig is the example model's configuration: none.
type counterConfig struct{}

type chatState struct {
	Turns int `json:"turns"`
}

// startAgent is an application's start-up: genkit, a model (here one that
// reports how much conversation it was given, where a real application
// registers a provider's plugin), and a prompt agent whose sessions live
// in st.
func startAgent(ctx context.Context, st adapters.Store) *aix.Agent[chatState] {
	store, err := genkitstore.New[chatState](st, genkitstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	g := genkit.Init(ctx, genkit.WithExperimental())
	genkit.DefineModelAction(g, "example/counter", &ai.ModelOptions{Supports: &ai.ModelSupports{Multiturn: true, SystemRole: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ *counterConfig, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			msg := ai.NewModelTextMessage(fmt.Sprintf("%d messages so far", len(req.Messages)))
			if cb != nil {
				if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: msg.Content}); err != nil {
					return nil, err
				}
			}
			return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
		})
	return genkitx.DefineAgent(g, "chat", aix.InlinePrompt{
		ai.WithModelName("example/counter"),
		ai.WithSystem("Be brief."),
	}, aix.WithSessionStore[chatState](store))
}

// A conversation that outlives its process: the second process resumes it
// by its session id from the store.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// Any backend: "sqlite:///var/lib/agent/sessions.db", "redis://...",
	// "postgres://...", "mongodb://...".
	st, err := adapters.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	first := startAgent(ctx, st)
	out, err := first.RunText(ctx, "hello", aix.WithSessionID[chatState]("conv-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Message.Text())

	// Another process, another genkit instance, the same store.
	second := startAgent(ctx, st)
	out, err = second.RunText(ctx, "still there?", aix.WithSessionID[chatState]("conv-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Message.Text())

	latest, err := second.GetLatestSnapshot(ctx, "conv-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(latest.State.Messages), "messages in", latest.SessionID)
	// Output:
	// 2 messages so far
	// 4 messages so far
	// 4 messages in conv-1
}

// SaveSnapshot is a read-modify-write: here, abort a pending snapshot only
// if it is still pending, whichever process finishes it first.
func ExampleStore_SaveSnapshot() {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	store, err := genkitstore.New[chatState](st, genkitstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	pending, err := store.SaveSnapshot(ctx, "", func(*aix.SessionSnapshot[chatState]) (*aix.SessionSnapshot[chatState], error) {
		return &aix.SessionSnapshot[chatState]{SessionID: "conv-1", Status: aix.SnapshotStatusPending}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	abort := func(existing *aix.SessionSnapshot[chatState]) (*aix.SessionSnapshot[chatState], error) {
		if existing == nil || existing.Status != aix.SnapshotStatusPending {
			return nil, nil // already finished: leave it
		}
		existing.Status = aix.SnapshotStatusAborted
		return existing, nil
	}
	for range 2 {
		saved, err := store.SaveSnapshot(ctx, pending.SnapshotID, abort)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("written:", saved != nil)
	}
	// Output:
	// written: true
	// written: false
}
