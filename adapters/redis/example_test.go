package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/redis"
	"github.com/agentsessions/sessions/internal/testkit/capture"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// Example stores a conversation in Redis. It needs a server: set REDIS_URL
// (redis://host:port/db, rediss://..., redis+cluster://h1:p1,h2:p2).
// TestExample runs it against a test server and checks its output.
func Example() {
	ctx := context.Background()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://localhost:6379/0"
	}
	st, err := redis.Open(ctx, url, redis.Options{KeyPrefix: "example:session", TTL: time.Hour})
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
	if err := session.Append(ctx, s, turn); err != nil { // one atomic batch, one round trip
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
	d, ok, _ := s.ExpiresIn(ctx)
	fmt.Println("expires within the hour:", ok && d > 0 && d <= time.Hour)
	fmt.Println("keys:", s.Keys())
	_ = s.Clear(ctx)
}

// TestExample runs Example against a test server and checks what it
// prints, as an "// Output:" comment would if a server were always there.
func TestExample(t *testing.T) {
	t.Setenv("REDIS_URL", testservers.Redis(t))
	require.Equal(t, `latest: {"role":"assistant","content":"Paris."}
popped: {"role":"assistant","content":"Paris."} true <nil>
items left: 1
expires within the hour: true
keys: [example:session:{user-123}:items example:session:{user-123}:meta]
`, capture.Stdout(t, Example))
}

// ExampleMovePrefix moves a store written with the old native default
// prefix, "agents:session", to the new one, "agents:native", which New
// accepts. (Not run: it needs a server and the old store.)
func ExampleMovePrefix() {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"})
	defer client.Close()
	moved, err := redis.MovePrefix(ctx, client, "agents:session", "")
	fmt.Println(moved, "sessions moved")
	if err != nil {
		// Sessions left in place, each named: their destination exists,
		// or a Python-layout id already wrote over one of their keys.
		fmt.Println(err)
	}
}

// ExampleSession_ItemsSince follows a session with session.ReadSince,
// reading only what was appended since its cursor, and appends a batch at
// most once with session.AppendOnce. It needs a server: set REDIS_URL.
// TestExampleFollow runs it against a test server and checks its output.
func ExampleSession_ItemsSince() {
	ctx := context.Background()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://localhost:6379/0"
	}
	st, err := redis.Open(ctx, url, redis.Options{KeyPrefix: "example:follow"})
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
	_ = st.RemoveSession(ctx, "user-123") // start the example afresh: operation ids too

	seen, cursor, err := session.ReadSince(ctx, s, "") // the whole history, and where it ends
	fmt.Println("at first:", len(seen), err)
	turn := []session.Item{session.MustItem(`{"role":"user","content":"Hi"}`)}
	for range 2 { // a retry with the same operation id lands nothing more
		ok, err := session.AppendOnce(ctx, s, "turn-1", turn)
		fmt.Println("appended:", ok, err)
	}
	news, cursor, err := session.ReadSince(ctx, s, cursor) // only what is new
	fmt.Println("new:", news, err)
	if _, _, err := session.Pop(ctx, s); err != nil {
		fmt.Println(err)
		return
	}
	_, _, err = session.ReadSince(ctx, s, cursor)
	fmt.Println("after a pop of the item read:", errors.Is(err, session.ErrCursorLost))
	_ = st.RemoveSession(ctx, "user-123")
}

// TestExampleFollow runs ExampleSession_ItemsSince against a test server.
func TestExampleFollow(t *testing.T) {
	t.Setenv("REDIS_URL", testservers.Redis(t))
	require.Equal(t, `at first: 0 <nil>
appended: true <nil>
appended: false <nil>
new: [{"role":"user","content":"Hi"}] <nil>
after a pop of the item read: true
`, capture.Stdout(t, ExampleSession_ItemsSince))
}
