package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
)

// BenchmarkFollow is a runtime following a session turn by turn: each turn
// another writer appends a 4-item turn, and the follower reads what is new
// with session.ReadSince. "follower" uses the adapter's Follower
// (ItemsSince); "fallback" hides it (legacy.Hide), so ReadSince reads the
// whole history each turn. Histories of 1k, 10k and 100k items: the
// follower's ns/turn stays flat, the fallback's grows with the history.
// items-read/turn is what the session returned to ReadSince's caller or
// to the fallback (the whole history).
func BenchmarkFollow(b *testing.B) {
	turn := benchItems(4, 100)
	for _, history := range []int{1_000, 10_000, 100_000} {
		for _, mode := range []string{"follower", "fallback"} {
			b.Run(fmt.Sprintf("history=%dk/%s", history/1000, mode), func(b *testing.B) {
				ctx := context.Background()
				st := openStore(b, filepath.Join(b.TempDir(), "follow.db"), Options{Synchronous: SyncNormal})
				fill(b, st.DB(), "s", history)
				writer, err := st.Session("s")
				require.NoError(b, err)
				var follower session.Session = writer
				if mode == "fallback" {
					follower = legacy.Hide(writer)
				}
				_, cursor, err := session.ReadSince(ctx, follower, "")
				require.NoError(b, err)
				read, total := 0, history
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					require.NoError(b, writer.AddItems(ctx, turn))
					b.StartTimer()
					got, next, err := session.ReadSince(ctx, follower, cursor)
					if err != nil || len(got) != len(turn) {
						b.Fatal(err, len(got))
					}
					cursor = next
					total += len(turn)
					if mode == "fallback" {
						read += total
					} else {
						read += len(got)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(read)/float64(b.N), "items-read/turn")
			})
		}
	}
}
