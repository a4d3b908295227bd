package eino_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/integrations/eino"
	"github.com/agentsessions/sessions/session"
)

// The Store over an SQLite file, as eino's Runner drives it: Set on an
// interrupt, Get on the resume, Delete once the resumed run is done. Give
// it to adk.RunnerConfig.CheckPointStore (or compose.WithCheckPointStore).
func ExampleNew() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "eino-example")
	defer os.RemoveAll(dir)

	st, err := adapters.Open(ctx, "sqlite://"+filepath.Join(dir, "sessions.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	cps, err := eino.New(st, eino.WithPrefix("eino:"))
	if err != nil {
		panic(err)
	}

	_ = cps.Set(ctx, "order-42", []byte("eino's gob bytes"))
	doc, ok, _ := cps.Get(ctx, "order-42")
	fmt.Printf("%q %v in session %q\n", doc, ok, cps.SessionID("order-42"))

	_ = cps.Delete(ctx, "order-42")
	_, ok, _ = cps.Get(ctx, "order-42")
	s, _ := cps.Session("order-42")
	names, _ := s.ListCheckpoints(ctx)
	fmt.Println(ok, names)

	// A store whose sessions keep no checkpoints is refused.
	_, err = eino.New(noCheckpoints{st})
	fmt.Println(err != nil)
	// Output:
	// "eino's gob bytes" true in session "eino:order-42"
	// false []
	// true
}

// noCheckpoints declares no capabilities.
type noCheckpoints struct{ adapters.Store }

func (noCheckpoints) Declared() session.Capabilities { return 0 }
