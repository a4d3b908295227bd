package adapters_test

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/memory" // registers memory://
	"github.com/agentsessions/sessions/session"
)

// Open a store by URL; the backend registered memory:// when its package
// was imported.
func ExampleOpen() {
	ctx := context.Background()
	st, err := adapters.Open(ctx, "memory://?ttl=30m")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	s, err := st.Session("user-42")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := s.AddItems(ctx, []session.Item{session.MustItem(`{"role":"user","content":"hi"}`)}); err != nil {
		fmt.Println(err)
		return
	}
	items, _ := s.Items(ctx)
	ids, _ := st.(adapters.Lister).ListSessions(ctx)
	fmt.Println(len(items), ids, st.Declared())
	// Output: 1 [user-42] latest,replace,ttl,checkpoints,checkpoint-commit,versioned-replace,follow,append-once
}

// Every option is applied or refused; a ';' is refused, not dropped.
func ExampleOpen_refused() {
	_, err := adapters.Open(context.Background(), "memory://?ttl=30m;refresh_on_read=true")
	fmt.Println(err)
	// Output: open memory://?ttl=30m;refresh_on_read=true: adapters: invalid store URL: ';' in the query of a memory URL: separate options with '&', and write a literal ';' as %3B
}

// Redact masks a password even in a URL that does not parse.
func ExampleRedact() {
	fmt.Println(adapters.Redact("redis://:Pa%ssWord@127.0.0.1:6379/0"))
	// Output: redis://:xxxxx@127.0.0.1:6379/0
}
