// Package interleave times a library operation against raw-driver code for
// the same work, op by op in one loop, so that a burst of load on a shared
// machine hits every side alike. The adapters' benchmarks use it; it
// reports the metrics internal/testkit/benchchart reads:
//
//	<side>-ns/op      the median time of one call of each side
//	x-<side>          lib-ns/op ÷ <side>-ns/op, for every raw side
//	<side>-allocs/op  the mean allocations of one call, counted apart
//
// The library side is named "lib"; the raw sides are named by the caller
// ("raw" for the tightest code, "raw-schema" for raw code on the
// library's own schema, ...).
package interleave

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// Side is one raw contender.
type Side struct {
	Name string // metric prefix: "raw", "raw-schema"
	Op   func()
}

// Lib is the name of the library side.
const Lib = "lib"

// allocCalls is how many calls of each side the allocation count makes.
const allocCalls = 100

// Run runs b.N rounds; each round calls lib and every raw side once, in an
// order rotated by one every round (with one raw side: alternating), each
// call timed on its own. prep, when not nil, runs untimed before every
// round, before the one untimed warm-up round, and before every call of
// the allocation count. It reports the metrics of the package comment and
// returns the median ns of each side by name.
func Run(b *testing.B, prep func(), lib func(), raws ...Side) map[string]float64 {
	b.Helper()
	sides := append([]Side{{Lib, lib}}, raws...)
	n := len(sides)
	if prep != nil {
		prep()
	}
	for _, s := range sides { // statements prepared, connections open
		s.Op()
	}
	times := make([][]time.Duration, n)
	for k := range times {
		times[k] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := range b.N {
		if prep != nil {
			b.StopTimer()
			prep()
			b.StartTimer()
		}
		for j := range n {
			k := (i + j) % n
			t0 := time.Now()
			sides[k].Op()
			times[k] = append(times[k], time.Since(t0))
		}
	}
	b.StopTimer()
	med := make(map[string]float64, n)
	for k, s := range sides {
		med[s.Name] = float64(Median(times[k]).Nanoseconds())
		b.ReportMetric(med[s.Name], s.Name+"-ns/op")
	}
	for _, s := range raws {
		if med[s.Name] > 0 {
			b.ReportMetric(med[Lib]/med[s.Name], "x-"+s.Name)
		}
	}
	calls := min(b.N, allocCalls)
	for _, s := range sides {
		b.ReportMetric(Allocs(calls, prep, s.Op), s.Name+"-allocs/op")
	}
	return med
}

// Median returns the median of ds (the upper one of an even count); it
// sorts ds.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// Allocs returns the mean allocations of fn over k calls, prep (when not
// nil) run before each and not counted.
func Allocs(k int, prep, fn func()) float64 {
	if k <= 0 {
		return 0
	}
	var total uint64
	var before, after runtime.MemStats
	for range k {
		if prep != nil {
			prep()
		}
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		total += after.Mallocs - before.Mallocs
	}
	return float64(total) / float64(k)
}
