package openaigo_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// benchBackends are the backends the compaction benchmarks measure.
func benchBackends() []backend {
	var out []backend
	for _, b := range everyBackend() {
		if slices.Contains([]string{"sqlite", "postgres", "redis", "mongo"}, b.name) {
			out = append(out, b)
		}
	}
	return out
}

// BenchmarkCompactionOverhead is the compaction session's cost per turn
// when no compaction triggers: a turn's append (4 items) then
// RunCompaction, against the bare session's append of the same items,
// interleaved op by op on twin sessions of one backend (the first of the
// two alternating). The metric wrapped/bare is the ratio of the two
// totals; run with -count to see its spread.
func BenchmarkCompactionOverhead(b *testing.B) {
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			open, _ := be.open(b)
			api := newFakeAPI(b, e2eScript)
			bare := open(fmt.Sprintf("bare-%d", time.Now().UnixNano()))
			wrapped, err := openaigo.NewCompactionSession(open(fmt.Sprintf("wrapped-%d", time.Now().UnixNano())), ptr(newClient(api.URL())),
				openaigo.CompactionOptions{ShouldCompact: func(openaigo.CompactionContext) bool { return false }})
			if err != nil {
				b.Fatal(err)
			}
			ca := wrapped.(session.CompactionAware)
			var tb, tw time.Duration
			b.ResetTimer()
			for i := range b.N {
				items, args := turnItems(i), session.CompactionArgs{ResponseID: fmt.Sprintf("resp_%d", i)}
				bareOp := func() {
					start := time.Now()
					if err := session.Append(ctx, bare, items); err != nil {
						b.Fatal(err)
					}
					tb += time.Since(start)
				}
				wrappedOp := func() {
					start := time.Now()
					if err := session.Append(ctx, wrapped, items); err != nil {
						b.Fatal(err)
					}
					if err := ca.RunCompaction(ctx, args); err != nil {
						b.Fatal(err)
					}
					tw += time.Since(start)
				}
				if i%2 == 0 {
					bareOp()
					wrappedOp()
				} else {
					wrappedOp()
					bareOp()
				}
			}
			b.ReportMetric(float64(tw)/float64(tb), "wrapped/bare")
			b.ReportMetric(float64(tb.Microseconds())/float64(b.N), "bare-µs/turn")
		})
	}
}

// BenchmarkCompactionReplace is what one compaction costs the store: the
// read of the history between two versions and the replace against that
// version by the compacted output (its user messages, a quarter of the
// items here, and one compaction item), at 1k, 10k and 100k items. The
// compact request itself is the API's time and is not measured. Run with
// -benchtime 3x: each op restores the history first, untimed.
func BenchmarkCompactionReplace(b *testing.B) {
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			open, _ := be.open(b)
			for _, n := range []int{1_000, 10_000, 100_000} {
				b.Run(fmt.Sprint(n), func(b *testing.B) {
					ctx := context.Background()
					s := open(fmt.Sprintf("replace-%d-%d", n, time.Now().UnixNano()))
					var full []session.Item
					for k := 0; len(full) < n; k++ {
						full = append(full, turnItems(k)...)
					}
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						if err := session.Replace(ctx, s, full); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						v, err := session.Version(ctx, s)
						if err != nil {
							b.Fatal(err)
						}
						items, err := session.All(ctx, s)
						if err != nil {
							b.Fatal(err)
						}
						if again, err := session.Version(ctx, s); err != nil || again != v {
							b.Fatal("version moved", err)
						}
						var out []session.Item
						for _, it := range items {
							if it.Role() == "user" {
								out = append(out, it)
							}
						}
						out = append(out, session.MustItem(`{"type":"compaction","id":"cmp_1","encrypted_content":"x"}`))
						if err := session.ReplaceIf(ctx, s, v, out); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
