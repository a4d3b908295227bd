package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/session"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// One file holds every conversation; Python's SQLiteSession can open
	// it too.
	st, err := sqlite.OpenFile(ctx, filepath.Join(dir, "agent.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	s, err := st.Session("conversation-42")
	if err != nil {
		log.Fatal(err)
	}
	turn, err := session.ParseItems(
		`{"role":"user","content":"What's the weather in Paris?"}`,
		`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"}`,
		`{"type":"function_call_output","call_id":"call_1","output":"21°C, clear"}`,
		`{"role":"assistant","content":"It is 21°C and clear in Paris."}`,
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.AddItems(ctx, turn); err != nil { // one atomic batch
		log.Fatal(err)
	}

	recent, err := s.LatestItems(ctx, 2) // the newest two, oldest first
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range recent {
		fmt.Println(it)
	}

	last, ok, err := s.PopItem(ctx)
	if err != nil {
		log.Fatal(err)
	}
	all, err := s.Items(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ok, last.Role(), len(all))
	// Output:
	// {"type":"function_call_output","call_id":"call_1","output":"21°C, clear"}
	// {"role":"assistant","content":"It is 21°C and clear in Paris."}
	// true assistant 3
}
