package encrypted_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/session"
)

// Wrap any session: the store holds envelopes Python's EncryptedSession
// reads, and the wrapper returns the items byte for byte. A second key
// rotates without rewriting history.
func ExampleNew() {
	ctx := context.Background()
	store := memory.New(memory.Options{})
	inner, _ := store.Session("conversation-42")
	s, err := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "master key one"}}})
	if err != nil {
		panic(err)
	}
	if err := session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"my card is 4111..."}`)}); err != nil {
		panic(err)
	}
	stored, _ := session.All(ctx, inner)
	fmt.Println("stored:", strings.Contains(stored[0].String(), `"__enc__":1`), strings.Contains(stored[0].String(), "4111"))

	rotated, _ := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{
		{ID: "k2", Secret: "master key two"}, // the primary: new items
		{ID: "k1", Secret: "master key one"}, // still reads the old ones
	}})
	items, err := session.All(ctx, rotated)
	fmt.Println(items[0], err)

	wrong, _ := encrypted.New(inner, encrypted.Options{Keys: []encrypted.Key{{ID: "k1", Secret: "a wrong key"}}})
	_, err = session.All(ctx, wrong)
	fmt.Println(err)
	// Output:
	// stored: true false
	// {"role":"user","content":"my card is 4111..."} <nil>
	// encrypted: session "conversation-42", item 0 (key id "k1"): token signature does not match (wrong key or tampered token)
}
