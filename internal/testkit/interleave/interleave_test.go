package interleave

import (
	"slices"
	"testing"
	"time"
)

// TestRunRotatesAndReports runs three sides under testing.Benchmark and
// checks the order of the calls (every side once a round, the first one
// rotating), that prep runs before every round, and the metrics.
func TestRunRotatesAndReports(t *testing.T) {
	var calls []string
	var preps int
	var rounds int
	res := testing.Benchmark(func(b *testing.B) {
		calls, preps = nil, 0
		rounds = b.N
		Run(b, func() { preps++ },
			func() { calls = append(calls, Lib) },
			Side{"raw", func() { calls = append(calls, "raw") }},
			Side{"raw-schema", func() { calls = append(calls, "raw-schema") }})
	})
	sides := []string{Lib, "raw", "raw-schema"}
	warm, timed := calls[:3], calls[3:3+3*rounds]
	if !slices.Equal(warm, sides) {
		t.Fatalf("warm-up round %q", warm)
	}
	for i := range rounds {
		got := timed[3*i : 3*i+3]
		want := []string{sides[i%3], sides[(i+1)%3], sides[(i+2)%3]}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %q, want %q", i, got, want)
		}
	}
	allocCalls := min(rounds, allocCalls)
	if rest := calls[3+3*rounds:]; len(rest) != 3*allocCalls {
		t.Fatalf("%d calls after the timed rounds, want %d", len(rest), 3*allocCalls)
	}
	if want := 1 + rounds + 3*allocCalls; preps != want {
		t.Errorf("prep ran %d times, want %d", preps, want)
	}
	for _, m := range []string{"lib-ns/op", "raw-ns/op", "raw-schema-ns/op", "lib-allocs/op", "raw-allocs/op", "raw-schema-allocs/op"} {
		if _, ok := res.Extra[m]; !ok {
			t.Errorf("metric %s missing: %v", m, res.Extra)
		}
	}
	// x-raw is the ratio of the medians; it exists whenever raw's median
	// is not zero (a clock that does not tick would make it zero).
	if res.Extra["raw-ns/op"] > 0 {
		if got, want := res.Extra["x-raw"], res.Extra["lib-ns/op"]/res.Extra["raw-ns/op"]; got != want {
			t.Errorf("x-raw %v, want %v", got, want)
		}
	}
}

// TestMedian checks the median of odd and even counts.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {[]time.Duration{3, 1, 2}, 2}, {[]time.Duration{4, 1, 3, 2}, 3}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
