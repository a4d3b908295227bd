package main

import (
	"encoding/xml"
	"io"
	"slices"
	"strings"
	"testing"
)

// output is go test -bench output in the format the adapters' benchmarks
// print (custom metrics from b.ReportMetric, -count 3 on Pop), with the
// lines a run also prints: headers, a log line, PASS, ok, and a few broken
// ones.
const output = `goos: linux
goarch: amd64
pkg: github.com/agentsessions/sessions/adapters/sqlite
cpu: AMD EPYC 7B13
BenchmarkAppend20/sync=normal-2         	    2000	    468213 ns/op	    105021 raw-ns/op	    107340 lib-ns/op	         1.022 x-raw	        46.00 raw-allocs/op	        71.00 lib-allocs/op	         1.543 x-raw-allocs
BenchmarkPop/sync=full-2                	    2000	   1012345 ns/op	    480000 raw-ns/op	    500000 lib-ns/op	         1.042 x-raw	        12.00 raw-allocs/op	        30.00 lib-allocs/op	         2.500 x-raw-allocs
BenchmarkPop/sync=full-2                	    2000	   1112345 ns/op	    470000 raw-ns/op	    520000 lib-ns/op	         1.106 x-raw	        12.00 raw-allocs/op	        31.00 lib-allocs/op	         2.583 x-raw-allocs
BenchmarkPop/sync=full-2                	    2000	    912345 ns/op	    490000 raw-ns/op	    510000 lib-ns/op	         1.041 x-raw	        12.00 raw-allocs/op	        29.00 lib-allocs/op	         2.417 x-raw-allocs
BenchmarkLatest50/history=1000k-2
    bench_test.go:42: a log line in the middle
BenchmarkLatest50/history=1000k-2       	    2000	     98765 ns/op	     45000 raw-ns/op	     47000 lib-ns/op	         1.044 x-raw
BenchmarkConcurrentAppend/sync=full/writers=16-2         	    4000	    250000 ns/op	      2100 raw-batches/s	      9800 lib-batches/s	         4.667 x-raw-throughput	     11.20 batches/tx
BenchmarkPop/sync=full-2                	    2000	   abc ns/op
BenchmarkPop/sync=full-2                	    2000	   1000 ns/op	  5
--- FAIL: BenchmarkItems/history=1k-2
PASS
ok  	github.com/agentsessions/sessions/adapters/sqlite	42.123s
`

// TestParse reads result lines and skips every other line.
func TestParse(t *testing.T) {
	samples, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range samples {
		names = append(names, s.Name)
	}
	want := []string{
		"BenchmarkAppend20/sync=normal",
		"BenchmarkPop/sync=full", "BenchmarkPop/sync=full", "BenchmarkPop/sync=full",
		"BenchmarkLatest50/history=1000k",
		"BenchmarkConcurrentAppend/sync=full/writers=16",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("names:\n got %q\nwant %q", names, want)
	}
	a := samples[0]
	if a.N != 2000 || a.Metrics["ns/op"] != 468213 || a.Metrics["x-raw"] != 1.022 ||
		a.Metrics["lib-allocs/op"] != 71 || len(a.Metrics) != 7 {
		t.Errorf("first sample: %+v", a)
	}
	c := samples[5]
	if c.Metrics["lib-batches/s"] != 9800 || c.Metrics["batches/tx"] != 11.2 {
		t.Errorf("concurrent sample: %+v", c)
	}
}

// TestParseLineRedis reads a Redis line, its metrics found under their aliases.
func TestParseLineRedis(t *testing.T) {
	// The Redis benchmarks say "adapter" and "ratio", and ReportAllocs adds B/op and allocs/op.
	s, ok := ParseLine("BenchmarkLatest50/1000000-16   \t    2000\t     61234 ns/op\t     28000 raw-ns/op\t     33000 adapter-ns/op\t         1.179 ratio\t        12.00 raw-allocs/op\t        64.00 adapter-allocs/op\t   21000 B/op\t     160 allocs/op")
	if !ok || s.Name != "BenchmarkLatest50/1000000" {
		t.Fatalf("ParseLine = %+v, %v", s, ok)
	}
	r := Result{Pkg: "redis", Name: s.Name, Metrics: s.Metrics}
	if v, _ := r.metric("lib-ns/op"); v != 33000 {
		t.Errorf("lib-ns/op = %v", v)
	}
	if v, _ := r.metric("x-raw"); v != 1.179 {
		t.Errorf("x-raw = %v", v)
	}
	if r.label() != "redis Latest50 1000000" {
		t.Errorf("label = %q", r.label())
	}
}

// TestParseLineMalformed: broken lines are not results.
func TestParseLineMalformed(t *testing.T) {
	for _, l := range []string{
		"",
		"PASS",
		"BenchmarkPop-2",
		"BenchmarkPop-2 \t 2000",
		"BenchmarkPop-2 \t 2000 \t 12 ns/op \t 7",
		"BenchmarkPop-2 \t many \t 12 ns/op",
		"BenchmarkPop-2 \t 2000 \t NaNish ns/op",
		"--- BENCH: BenchmarkPop-2",
		"ok  \tgithub.com/agentsessions/sessions/adapters/redis\t3.1s",
	} {
		if s, ok := ParseLine(l); ok {
			t.Errorf("ParseLine(%q) = %+v, want not ok", l, s)
		}
	}
}

// TestStripProcs removes only a numeric -GOMAXPROCS suffix.
func TestStripProcs(t *testing.T) {
	for in, want := range map[string]string{
		"BenchmarkPop-2":                        "BenchmarkPop",
		"BenchmarkPop":                          "BenchmarkPop",
		"BenchmarkLatest50/1000-16":             "BenchmarkLatest50/1000",
		"BenchmarkConcurrentAppend/one-session": "BenchmarkConcurrentAppend/one-session",
		"BenchmarkX-":                           "BenchmarkX-",
	} {
		if got := stripProcs(in); got != want {
			t.Errorf("stripProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMedians takes the median of each metric, odd and even counts.
func TestMedians(t *testing.T) {
	samples, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	rs := Medians("sqlite", samples)
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	pop := rs[1]
	if pop.Name != "BenchmarkPop/sync=full" || pop.Runs != 3 {
		t.Fatalf("pop: %+v", pop)
	}
	for unit, want := range map[string]float64{
		"ns/op": 1012345, "raw-ns/op": 480000, "lib-ns/op": 510000, "x-raw": 1.042, "lib-allocs/op": 30,
	} {
		if got := pop.Metrics[unit]; got != want {
			t.Errorf("median %s = %v, want %v", unit, got, want)
		}
	}
	// An even count: the mean of the two middle values.
	two := Medians("redis", []Sample{
		{Name: "BenchmarkPop", Metrics: map[string]float64{"ratio": 1.0}},
		{Name: "BenchmarkPop", Metrics: map[string]float64{"ratio": 1.2, "raw-ns/op": 5}},
	})
	if m := two[0].Metrics; m["ratio"] != 1.1 || m["raw-ns/op"] != 5 {
		t.Errorf("even count: %v", m)
	}
}

// TestSortResults orders by package, benchmark, then numbers as numbers.
func TestSortResults(t *testing.T) {
	var rs []Result
	for _, n := range []string{
		"redis/BenchmarkPop",
		"sqlite/BenchmarkConcurrentAppend/sync=full/writers=16",
		"sqlite/BenchmarkLatest50/history=100k",
		"sqlite/BenchmarkConcurrentAppend/sync=full/writers=2",
		"sqlite/BenchmarkLatest50/history=1k",
		"sqlite/BenchmarkAppend20/sync=normal",
		"sqlite/BenchmarkAppend20/sync=full",
	} {
		pkg, name, _ := strings.Cut(n, "/")
		rs = append(rs, Result{Pkg: pkg, Name: name})
	}
	sortResults(rs)
	var got []string
	for _, r := range rs {
		got = append(got, r.Pkg+"/"+r.Name)
	}
	want := []string{
		"sqlite/BenchmarkAppend20/sync=full",
		"sqlite/BenchmarkAppend20/sync=normal",
		"sqlite/BenchmarkLatest50/history=1k",
		"sqlite/BenchmarkLatest50/history=100k",
		"sqlite/BenchmarkConcurrentAppend/sync=full/writers=2",
		"sqlite/BenchmarkConcurrentAppend/sync=full/writers=16",
		"redis/BenchmarkPop",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
}

// TestCharts checks that the charts of parsed results are well-formed XML
// and the same for the same numbers.
func TestCharts(t *testing.T) {
	samples, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	rs := Medians("sqlite", samples)
	sortResults(rs)
	m := meta{Date: "2026-01-02 03:04 UTC", CPU: "Test CPU <1>", Cores: 2, Go: "go1.26", Command: "go run ./internal/testkit/benchchart -quick", Quick: true}
	for name, chart := range map[string]func() []byte{
		"ratio":        func() []byte { return ratioSVG(rs, m) },
		"group-commit": func() []byte { return groupCommitSVG(rs, m) },
	} {
		a, b := chart(), chart()
		if string(a) != string(b) {
			t.Errorf("%s: not deterministic", name)
		}
		d := xml.NewDecoder(strings.NewReader(string(a)))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: invalid XML: %v", name, err)
			}
		}
		if !strings.Contains(string(a), "Test CPU &lt;1&gt;") || !strings.Contains(string(a), "quick run") {
			t.Errorf("%s: footer missing or not escaped", name)
		}
	}
	if redisConcurrentSVG(rs, m) != nil {
		t.Error("redis-concurrent chart without Redis results")
	}
}

// TestSpreads: each metric's median, minimum, maximum and per-run values,
// and their formatting as "median [min–max]".
func TestSpreads(t *testing.T) {
	samples, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	pop := Medians("sqlite", samples)[1]
	sp, ok := pop.spreadOf("x-raw")
	if !ok || sp != (Spread{Median: 1.042, Min: 1.041, Max: 1.106}) {
		t.Fatalf("x-raw spread %+v, %v", sp, ok)
	}
	if got := pop.Values["x-raw"]; !slices.Equal(got, []float64{1.042, 1.106, 1.041}) {
		t.Errorf("x-raw values in run order: %v", got)
	}
	if got := spreadCell(pop, "x-raw"); got != "1.04 [1.04–1.11]" {
		t.Errorf("spreadCell = %q", got)
	}
	if got := spreadCell(pop, "x-raw-schema"); got != "–" {
		t.Errorf("missing metric: %q", got)
	}
	// Under an alias, and an even count: the median is the mean of the
	// two middle runs, min and max the extremes.
	r := Medians("redis", []Sample{
		{Name: "BenchmarkPop", Metrics: map[string]float64{"ratio": 1.3}},
		{Name: "BenchmarkPop", Metrics: map[string]float64{"ratio": 0.9}},
		{Name: "BenchmarkPop", Metrics: map[string]float64{"ratio": 1.0}},
		{Name: "BenchmarkPop", Metrics: map[string]float64{"ratio": 1.2}},
	})[0]
	if sp, _ := r.spreadOf("x-raw"); sp != (Spread{Median: 1.1, Min: 0.9, Max: 1.3}) {
		t.Errorf("alias spread %+v", sp)
	}
	// One run, or results saved without spreads: the median alone.
	old := Result{Metrics: map[string]float64{"x-raw": 1.234}}
	if got := spreadCell(old, "x-raw"); got != "1.23" {
		t.Errorf("no spread: %q", got)
	}
}

// TestResultsMD: the tables carry the spreads, the save ratios get their
// own table, and the load is stated.
func TestResultsMD(t *testing.T) {
	samples, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	rs := Medians("sqlite", samples)
	rs = append(rs, Medians("runstate", []Sample{
		{Name: "BenchmarkRunTurnRatio/postgres", Metrics: map[string]float64{"append-µs": 1500, "atomic/append": 1.5, "digest/append": 4}},
		{Name: "BenchmarkRunTurnRatio/postgres", Metrics: map[string]float64{"append-µs": 1700, "atomic/append": 1.3, "digest/append": 5}},
		{Name: "BenchmarkRunTurnRatio/postgres", Metrics: map[string]float64{"append-µs": 1600, "atomic/append": 1.4, "digest/append": 6}},
	})...)
	sortResults(rs)
	m := meta{Date: "d", CPU: "c", Cores: 2, Go: "go", Kernel: "6.1", LoadBefore: "1.00 2.00 3.00", LoadAfter: "4.00 5.00 6.00"}
	md := string(resultsMD(rs, m))
	for _, want := range []string{
		"| sqlite | Pop/sync=full | 3 | 480,000 | 510,000 | 1.04 [1.04–1.11] | – |",
		"| postgres | 3 | 1,600 | – | 1.40 [1.30–1.50] | – | 5.00 [4.00–6.00] |",
		"load average (1/5/15 min) 1.00 2.00 3.00 before, 4.00 5.00 6.00 after",
		"Linux 6.1",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(ratioSVGText(rs, m), "RunTurnRatio") {
		t.Error("the ratio chart shows a save benchmark")
	}
}

func ratioSVGText(rs []Result, m meta) string { return string(ratioSVG(rs, m)) }
