package linearize

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/agentsessions/sessions/session"
)

// EnvKnown runs the reproductions of known deviations from
// docs/semantics.md that the library has not fixed yet: LINEARIZE_KNOWN=1.
// Each fails while its deviation is there.
const EnvKnown = "LINEARIZE_KNOWN"

// TestRedisCursorLostEarly: the Redis adapter's native follower reports a
// cursor lost although the items it stands for are still the first of the
// history, once the pops since the cursor have left more marks than fit in
// 200 bytes (adapters/redis: "beyond that the two oldest are merged, which
// can only report a cursor lost early"). docs/semantics.md (§2.1 Redis:
// "a pop below a cursor, a clear or a replace is reported") and
// session.ErrCursorLost ("a cursor whose items are no longer all in the
// history as the reader saw them") allow no such report, so the model
// does not either, and a campaign whose client holds a cursor across some
// 35 pops at rising indices would find the Redis history not
// linearizable. Here: 10 items, a pop, 3 items, a cursor after the 12,
// then rounds of 2 appends and a pop (each pop at a higher index than the
// last, so each leaves a mark) while the cursor's items stay.
func TestRedisCursorLostEarly(t *testing.T) {
	if os.Getenv(EnvKnown) != "1" {
		t.Skip("a reproduction of a known deviation: " + EnvKnown + "=1 runs it")
	}
	ctx := context.Background()
	s, err := storeOpener(t, redisDSN(t))("early-" + stamp())
	if err != nil {
		t.Fatal(err)
	}
	seq := 0
	add := func(n int) {
		items := make([]session.Item, n)
		for i := range items {
			items[i] = MakeID(1, seq).Item()
			seq++
		}
		if err := session.Append(ctx, s, items); err != nil {
			t.Fatal(err)
		}
	}
	pop := func() {
		if _, ok, err := session.Pop(ctx, s); err != nil || !ok {
			t.Fatalf("pop: %v %v", ok, err)
		}
	}
	add(10)
	if _, _, err := session.ReadSince(ctx, s, ""); err != nil { // starts the epoch
		t.Fatal(err)
	}
	pop()
	add(3)
	seen, cursor, err := session.ReadSince(ctx, s, "")
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 60; round++ {
		add(2)
		pop()
		_, _, err := session.ReadSince(ctx, s, cursor)
		if errors.Is(err, session.ErrCursorLost) {
			all, aerr := session.All(ctx, s)
			if aerr != nil {
				t.Fatal(aerr)
			}
			if len(all) >= len(seen) && slices.Equal(ParseIDs(all[:len(seen)]), ParseIDs(seen)) {
				t.Fatalf("round %d: a cursor after %d items is reported lost (%v), though those items are still the history's first %d (of %d)",
					round, len(seen), err, len(seen), len(all))
			}
			t.Fatalf("round %d: the cursor's items changed: %v", round, err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
