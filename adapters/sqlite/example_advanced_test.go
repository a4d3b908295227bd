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

// A store of the Python SDK's AdvancedSQLiteSession: Go appends with the
// class's structure rows, branches from a turn, records usage per turn
// and lists turns, and the class sees all of it.
func ExampleSession_CreateBranchFromTurn() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// A file AdvancedSQLiteSession(create_tables=True) made is opened as
	// it is; this one is made by Go.
	st, err := sqlite.OpenFile(ctx, filepath.Join(dir, "agent.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateAdvancedTables(ctx); err != nil {
		log.Fatal(err)
	}

	s, err := st.Session("conversation-42")
	if err != nil {
		log.Fatal(err)
	}
	for _, turn := range [][]string{
		{`{"role": "user", "content": "Plan a trip to Paris."}`, `{"role": "assistant", "content": "Three days?"}`},
		{`{"role": "user", "content": "Make it a week."}`, `{"role": "assistant", "content": "A week it is."}`},
	} {
		items, err := session.ParseItems(turn...)
		if err != nil {
			log.Fatal(err)
		}
		if err := s.AddItems(ctx, items); err != nil {
			log.Fatal(err)
		}
		if err := s.RecordUsage(ctx, sqlite.Usage{Requests: 1, InputTokens: 40, OutputTokens: 8, TotalTokens: 48}); err != nil {
			log.Fatal(err)
		}
	}

	// Try turn 2 again on a branch: it holds turn 1, and is now current.
	branch, err := s.CreateBranchFromTurn(ctx, 2, "shorter")
	if err != nil {
		log.Fatal(err)
	}
	retry, err := session.ParseItems(`{"role": "user", "content": "Make it a weekend."}`)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.AddItems(ctx, retry); err != nil {
		log.Fatal(err)
	}

	turns, err := s.Turns(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range turns {
		fmt.Println(branch, t.Number, t.Preview)
	}
	if err := s.SwitchBranch(ctx, sqlite.MainBranch); err != nil {
		log.Fatal(err)
	}
	usage, err := s.TurnUsage(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	branches, err := s.ListBranches(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(usage), "turns with usage on", s.CurrentBranch())
	for _, b := range branches {
		fmt.Println(b.ID, b.MessageCount, b.UserTurns, b.Current)
	}
	// Output:
	// shorter 1 Plan a trip to Paris.
	// shorter 2 Make it a weekend.
	// 2 turns with usage on main
	// main 4 2 true
	// shorter 3 2 false
}
