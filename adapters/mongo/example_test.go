package mongo_test

import (
	"context"
	"fmt"
	"log"
	"time"

	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters/mongo"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// Open a Store from a URI (the database comes from its path), append a
// turn, read the newest items for the next model call, and take back the
// last item. The Python SDK's MongoDBSession can share the database: same
// collections, same documents.
//
// It needs a MongoDB server, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	st, err := mongo.Open(ctx, "mongodb://localhost:27017/agents?replicaSet=rs0", mongo.Options{
		TTL: 30 * 24 * time.Hour, // sessions idle for 30 days vanish
	})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close(ctx)

	s, err := st.Session("user-123")
	if err != nil {
		log.Fatal(err)
	}
	turn, err := session.ParseItems(
		`{"type":"message","role":"user","content":"What's the weather in Paris?"}`,
		`{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"}`,
		`{"type":"function_call_output","call_id":"call_1","output":"18°C, clear"}`,
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.AddItems(ctx, turn); err != nil { // one document, one atomic batch
		log.Fatal(err)
	}
	window, err := history.ModelInput(ctx, s, 50) // newest 50, orphans pruned
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(window), "items for the model")
	last, ok, err := s.PopItem(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if ok {
		fmt.Println("popped", last.Type())
	}
}

// New wraps a client the application already has; the Store never
// disconnects it.
func ExampleNew() {
	ctx := context.Background()
	client, err := mongodrv.Connect(options.Client().ApplyURI("mongodb://localhost:27017"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Disconnect(ctx)

	st, err := mongo.New(client, mongo.Options{Database: "agents"})
	if err != nil {
		log.Fatal(err)
	}
	s, err := st.Session("user-123")
	if err != nil {
		log.Fatal(err)
	}
	history, err := s.Items(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(history), "items")
	if err := s.ReplaceItems(ctx, history[len(history)/2:]); err != nil { // atomic, as compaction needs
		log.Fatal(err)
	}
}
