package main

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Sample is one result line of `go test -bench`: one run of one benchmark.
type Sample struct {
	Name    string             // full name, "BenchmarkPop/sync=full", without the -GOMAXPROCS suffix
	N       int64              // iterations
	Metrics map[string]float64 // unit → value: "ns/op" → 1234, "x-raw" → 1.02
}

// ParseLine parses one benchmark result line, such as
//
//	BenchmarkPop/sync=full-8   2000   51234 ns/op   24000 raw-ns/op   1.03 x-raw
//
// ok is false for any other line (headers, PASS, logs, a truncated line).
func ParseLine(line string) (s Sample, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return Sample{}, false
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || n <= 0 {
		return Sample{}, false
	}
	s = Sample{Name: stripProcs(f[0]), N: n, Metrics: make(map[string]float64, len(f)/2-1)}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Sample{}, false
		}
		s.Metrics[f[i+1]] = v
	}
	return s, true
}

// stripProcs removes the "-8" that go test appends to a benchmark's name
// when GOMAXPROCS is not 1.
func stripProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

// Parse returns the samples of go test output, in order; every line that
// is not a benchmark result is ignored.
func Parse(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if s, ok := ParseLine(sc.Text()); ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// Result is one benchmark of one package: the median of each of its
// metrics over its runs (-count), and each metric's spread.
type Result struct {
	Pkg     string             `json:"pkg"`  // "sqlite", "redis", "postgres", "mongo", "runstate"
	Name    string             `json:"name"` // "BenchmarkAppend20/sync=normal"
	Runs    int                `json:"runs"` // samples the medians are taken over
	Metrics map[string]float64 `json:"metrics"`
	// Min and Max are each metric's smallest and largest value over the
	// runs; Values its value in each run, in run order. A ratio a
	// benchmark reports (x-raw) is taken inside its run, so these are
	// the spread of per-run ratios, not ratios of pooled times.
	Min    map[string]float64   `json:"min,omitempty"`
	Max    map[string]float64   `json:"max,omitempty"`
	Values map[string][]float64 `json:"values,omitempty"`
}

// Spread is a metric's median, smallest and largest value over the runs.
type Spread struct{ Median, Min, Max float64 }

// spread returns r's Spread of the metric unit (no alias lookup); ok is
// false when r lacks it. A result without Min and Max (one saved by an
// older release) has a spread of its median alone.
func (r Result) spread(unit string) (Spread, bool) {
	m, ok := r.Metrics[unit]
	if !ok {
		return Spread{}, false
	}
	lo, okLo := r.Min[unit]
	hi, okHi := r.Max[unit]
	if !okLo || !okHi {
		lo, hi = m, m
	}
	return Spread{m, lo, hi}, true
}

// Medians groups samples by name and returns, for each name (in the order
// first seen), the median, minimum and maximum of each metric over the
// samples that report it, and its values in run order.
func Medians(pkg string, samples []Sample) []Result {
	var names []string
	byName := map[string][]Sample{}
	for _, s := range samples {
		if _, seen := byName[s.Name]; !seen {
			names = append(names, s.Name)
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	out := make([]Result, 0, len(names))
	for _, name := range names {
		runs := byName[name]
		values := map[string][]float64{}
		for _, s := range runs {
			for unit, v := range s.Metrics {
				values[unit] = append(values[unit], v)
			}
		}
		r := Result{Pkg: pkg, Name: name, Runs: len(runs), Metrics: make(map[string]float64, len(values)),
			Min: make(map[string]float64, len(values)), Max: make(map[string]float64, len(values)), Values: values}
		for unit, vs := range values {
			r.Min[unit], r.Max[unit] = slices.Min(vs), slices.Max(vs)
			r.Metrics[unit] = median(slices.Clone(vs))
		}
		out = append(out, r)
	}
	return out
}

// median returns the middle value of vs (the mean of the two middle ones
// for an even count); it sorts vs.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// benchOrder is the fixed order of the benchmarks in tables and charts.
var benchOrder = []string{"BenchmarkAppend20", "BenchmarkLatest50", "BenchmarkPop", "BenchmarkConcurrentAppend", "BenchmarkRunTurnRatio"}

// pkgOrder is the fixed order of the packages.
var pkgOrder = []string{"sqlite", "postgres", "redis", "mongo", "runstate"}

// sortResults orders results by package, then benchmark (benchOrder), then
// sub-benchmark name with numbers compared as numbers (writers=2 before
// writers=16), so that the output depends only on the numbers.
func sortResults(rs []Result) {
	rank := func(list []string, s string) int {
		if i := slices.Index(list, s); i >= 0 {
			return i
		}
		return len(list)
	}
	slices.SortStableFunc(rs, func(a, b Result) int {
		if d := rank(pkgOrder, a.Pkg) - rank(pkgOrder, b.Pkg); d != 0 {
			return d
		}
		ta, _, _ := strings.Cut(a.Name, "/")
		tb, _, _ := strings.Cut(b.Name, "/")
		if d := rank(benchOrder, ta) - rank(benchOrder, tb); d != 0 {
			return d
		}
		return naturalCompare(a.Name, b.Name)
	})
}

// naturalCompare compares a and b piece by piece, runs of digits by their
// numeric value and the rest as text.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		pa, ra := nextPiece(a)
		pb, rb := nextPiece(b)
		da, db := isDigit(pa[0]), isDigit(pb[0])
		switch {
		case da && db:
			na := strings.TrimLeft(pa, "0")
			nb := strings.TrimLeft(pb, "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
		default:
			if c := strings.Compare(pa, pb); c != 0 {
				return c
			}
		}
		a, b = ra, rb
	}
	return len(a) - len(b)
}

// nextPiece splits s (not empty) after its leading run of digits or of
// non-digits.
func nextPiece(s string) (piece, rest string) {
	d := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == d {
		i++
	}
	return s[:i], s[i:]
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
