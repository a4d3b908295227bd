package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldCommit returns a commit on s's held connection, for measuring: each
// call commits 20 items and a checkpoint document at the next version and
// fails tb unless it landed there.
func heldCommit(tb testing.TB, s *Session, version int64) func() {
	ctx := context.Background()
	items := benchItems("held", 20)
	doc := []byte(`{"$schemaVersion":"1.17","current_step":{"type":"next_step_run_again"},"current_turn_persisted_item_count":20}`)
	return func() {
		s.hold.mu.Lock()
		got, done, err := s.commitHeld(ctx, items, "run", doc, version)
		s.hold.mu.Unlock()
		if err != nil || !done || got != version+1 {
			tb.Fatalf("held commit at version %d: got %d, done %v, %v", version, got, done, err)
		}
		version = got
	}
}

// TestHeldCommitAllocs: a held commit allocates at most 19 times, 2 more
// per key with a TTL (its PEXPIRE), counting go-redis's. The list's length
// and the version go past 255 first: an integer below 256 in an interface
// does not allocate, and a long session's do.
func TestHeldCommitAllocs(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("ttl=%v", ttl), func(t *testing.T) {
			st := newStore(t, standaloneClient(t), Options{KeyPrefix: uniquePrefix(t), TTL: ttl})
			s, v := heldSession(t, st, "allocs")
			want := 19
			if ttl > 0 {
				want += 2 * len(s.all)
			}
			commit := heldCommit(t, s, v)
			for range 300 {
				commit()
			}
			got := testing.AllocsPerRun(100, commit)
			t.Logf("%.1f allocations per held commit", got)
			require.LessOrEqual(t, got, float64(want))
		})
	}
}

// BenchmarkHeldCommit: back-to-back commits of 20 items on a held
// connection, commitHeld alone.
func BenchmarkHeldCommit(b *testing.B) {
	st := newStore(b, standaloneClient(b), Options{KeyPrefix: uniquePrefix(b)})
	s, v := heldSession(b, st, "bench-held")
	commit := heldCommit(b, s, v)
	b.ReportAllocs()
	for b.Loop() {
		commit()
	}
}
