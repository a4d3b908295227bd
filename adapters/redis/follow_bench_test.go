package redis

import (
	"fmt"
	"testing"

	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
)

// BenchmarkFollow is a runtime following a session turn by turn: before
// each iteration a writer appends a 4-item turn, and the reader reads what
// is new, interleaved op by op with the tightest go-redis code ("raw":
// LRANGE from the length it last saw, trusting nothing). "follower" is
// session.ReadSince through the Session's ItemsSince (one MULTI/EXEC: the
// follow fields and LRANGE from the cursor); "fallback" hides it
// (legacy.Hide), so ReadSince reads the whole history each turn and
// digests it. Each mode is its own sub-benchmark, so that the fallback's
// work does not land on the follower's measurements. Histories of 1k and
// 10k items: the follower's ratio stays flat, the fallback's grows with
// the history.
func BenchmarkFollow(b *testing.B) {
	for _, history := range []int{1_000, 10_000} {
		for _, mode := range []string{"follower", "fallback"} {
			b.Run(fmt.Sprintf("history=%dk/%s", history/1000, mode), func(b *testing.B) {
				ctx, c, _, s, _ := benchSetup(b, Options{})
				for i := 0; i < history; i += 1000 {
					if err := s.AddItems(ctx, benchItems(fmt.Sprintf("h%d-", i), 1000)); err != nil {
						b.Fatal(err)
					}
				}
				turn := benchItems("t", 4)
				var reader session.Session = s
				if mode == "fallback" {
					reader = legacy.Hide(s)
				}
				_, cur, err := session.ReadSince(ctx, reader, "")
				if err != nil {
					b.Fatal(err)
				}
				rawLen := int64(history)
				interleaveN(b, []side{
					{"raw", func() error {
						got, err := c.LRange(ctx, s.keys[0], rawLen, -1).Result()
						if err == nil && len(got) != len(turn) {
							err = fmt.Errorf("read %d records, not %d", len(got), len(turn))
						}
						rawLen += int64(len(got))
						return err
					}},
					{mode, func() error {
						got, next, err := session.ReadSince(ctx, reader, cur)
						if err == nil && len(got) != len(turn) {
							err = fmt.Errorf("read %d items, not %d", len(got), len(turn))
						}
						cur = next
						return err
					}},
				}, func(int) {
					if err := s.AddItems(ctx, turn); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}
