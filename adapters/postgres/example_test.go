package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/postgres"
	"github.com/agentsessions/sessions/internal/testkit/capture"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// Example stores a conversation in PostgreSQL, in the tables Python's
// SQLAlchemySession uses. It needs a server: set DATABASE_URL
// (postgres://user:password@host:port/database). TestExample runs it
// against a test server and checks its output.
func Example() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = "postgres://localhost:5432/postgres"
	}
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: "example_sessions"})
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer st.Close()

	s, err := st.Session("user-123")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Clear(ctx) // start the example afresh

	turn := []session.Item{
		session.MustItem(`{"role":"user","content":"What's the capital of France?"}`),
		session.MustItem(`{"role":"assistant","content":"Paris."}`),
	}
	if err := session.Append(ctx, s, turn); err != nil { // one transaction, one round trip
		fmt.Println(err)
		return
	}
	latest, err := session.Latest(ctx, s, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("latest:", latest[0])

	left, ok, err := session.Pop(ctx, s)
	fmt.Println("popped:", left, ok, err)

	all, _ := session.All(ctx, s)
	fmt.Println("items left:", len(all))
	fmt.Println("capabilities:", st.Declared())
	_ = s.Clear(ctx)
}

// TestExample runs Example against a test server and checks what it
// prints, as an "// Output:" comment would if a server were always there.
func TestExample(t *testing.T) {
	t.Setenv("DATABASE_URL", testservers.Postgres(t))
	require.Equal(t, `latest: {"role":"assistant","content":"Paris."}
popped: {"role":"assistant","content":"Paris."} true <nil>
items left: 1
capabilities: latest,replace,checkpoints,checkpoint-commit,versioned-replace,follow,append-once
`, capture.Stdout(t, Example))
}
