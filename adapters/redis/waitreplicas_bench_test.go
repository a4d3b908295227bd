package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// BenchmarkWaitReplicas measures the price of ?wait_replicas=1 (issue 36
// item 6): on a sentinel group of testservers (a primary, one replica,
// both with appendfsync always, three sentinels), 8 writers each append
// waitRoundBatches 2-item batches to a session of their own through the
// sentinel URL, once on a Store opened without wait_replicas and once on
// one opened with ?wait_replicas=1, the two alternating round by round
// (ABBA, so that neither side always runs first). Each b.N iteration is
// one pair of rounds. It reports the median acknowledged batches a second
// of each side, and the median of the per-pair ratios (with/without),
// and logs every pair and the spread (min..max).
//
//	go test ./adapters/redis -run '^$' -bench WaitReplicas -benchtime 10x
func BenchmarkWaitReplicas(b *testing.B) {
	ctx := context.Background()
	g := testservers.NewSentinelGroup(b)
	prefix := uniquePrefix(b)
	open := func(query string) *Store {
		as, err := adapters.Open(ctx, g.URL("dial_timeout=500ms&key_prefix="+prefix+query))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = as.Close() })
		return as.(*urlStore).st
	}
	plain := open("")
	waiting := open("&wait_replicas=1&wait_timeout=2s")
	if waiting.Options().WaitReplicas != 1 || plain.Options().WaitReplicas != 0 {
		b.Fatalf("options: %d and %d", plain.Options().WaitReplicas, waiting.Options().WaitReplicas)
	}
	const writers = 8
	items := popItemsOf(300, 2)
	round := func(st *Store, tag string) float64 {
		var wg sync.WaitGroup
		errs := make([]error, writers)
		t0 := time.Now()
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := st.Session(fmt.Sprintf("%s-w%d", tag, w))
				if err != nil {
					errs[w] = err
					return
				}
				for range waitRoundBatches {
					if err := s.AddItems(ctx, items); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(t0)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return float64(writers*waitRoundBatches) / el.Seconds()
	}
	// One warm-up round of each, not counted.
	round(plain, "warm-plain")
	round(waiting, "warm-wait")
	var without, with, ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var p, w float64
		if i%2 == 0 {
			p = round(plain, fmt.Sprintf("p%d", i))
			w = round(waiting, fmt.Sprintf("w%d", i))
		} else {
			w = round(waiting, fmt.Sprintf("w%d", i))
			p = round(plain, fmt.Sprintf("p%d", i))
		}
		without, with, ratios = append(without, p), append(with, w), append(ratios, w/p)
	}
	b.StopTimer()
	b.ReportMetric(medianOf(without), "without-batches/s")
	b.ReportMetric(medianOf(with), "with-batches/s")
	b.ReportMetric(medianOf(ratios), "ratio")
	b.Logf("pairs (without/with batches/s): %s", pairsText(without, with))
	b.Logf("%d pairs of %d batches (%d writers): without %.0f (%.0f..%.0f), with wait_replicas=1 %.0f (%.0f..%.0f) batches/s; ratio %.2f (%.2f..%.2f)",
		len(ratios), writers*waitRoundBatches, writers,
		medianOf(without), slices.Min(without), slices.Max(without),
		medianOf(with), slices.Min(with), slices.Max(with),
		medianOf(ratios), slices.Min(ratios), slices.Max(ratios))
}

// pairsText lists the rounds of each pair, "without/with", space-separated.
func pairsText(without, with []float64) string {
	var sb strings.Builder
	for i := range without {
		fmt.Fprintf(&sb, " %.0f/%.0f", without[i], with[i])
	}
	return sb.String()
}

// waitRoundBatches is how many batches each writer of a
// BenchmarkWaitReplicas round appends.
const waitRoundBatches = 200

// medianOf returns the median of xs (the mean of the middle two for an
// even count).
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
