// Command benchchart runs the SQLite and Redis adapters' benchmarks (each
// operation timed against the tightest raw-driver code for the same work)
// and writes their numbers as charts and tables:
//
//	go run ./internal/testkit/benchchart [-out docs/benchmarks] [-benchtime 2000x] [-count 3] [-quick]
//
// With -from results.json it only redraws the outputs from saved numbers.
//
// It writes, into -out: library-vs-raw.svg (library time ÷ raw time of
// each single operation), group-commit.svg (SQLite concurrent appends,
// batches/s against writers), redis-concurrent.svg (Redis concurrent
// appends), results.md and results.json. Run it from the module root. The
// Redis benchmarks need redis-server in PATH, or SESSIONS_REDIS_URL.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// target is the project's goal for library time ÷ raw time.
const target = 1.15

// config holds the command-line settings.
type config struct {
	out        string
	benchtime  string // single operations
	count      int
	cbenchtime string // SQLite BenchmarkConcurrentAppend, in batches
	rbenchtime string // Redis BenchmarkConcurrentAppend, in rounds of 16×20 batches per side
	ccount     int    // both concurrent benchmarks
	quick      bool
	from       string // results.json to redraw from, instead of running the benchmarks
}

// job is one `go test` run.
type job struct {
	label     string // package name in charts and tables: "sqlite", "redis"
	pkg       string // "./adapters/sqlite"
	pattern   string // -bench
	benchtime string
	count     int
}

// args returns the arguments of go for j.
func (j job) args() []string {
	return []string{"test", "-run", "^$", "-bench", j.pattern, "-benchtime", j.benchtime,
		"-count", strconv.Itoa(j.count), "-timeout", "60m", j.pkg}
}

// String returns j as a shell command line.
func (j job) String() string { return shellJoin(append([]string{"go"}, j.args()...)) }

// singleOps selects the interleaved single-operation benchmarks.
const singleOps = "^(BenchmarkAppend20|BenchmarkPop|BenchmarkLatest50)$"

// jobs returns the go test runs of cfg, SQLite first.
func jobs(cfg config) []job {
	sqliteConc := "^BenchmarkConcurrentAppend$"
	if cfg.quick {
		sqliteConc += "/^sync=(full|normal)$/^writers=(1|16)$"
	}
	return []job{
		{"sqlite", "./adapters/sqlite", singleOps, cfg.benchtime, cfg.count},
		{"sqlite", "./adapters/sqlite", sqliteConc, cfg.cbenchtime, cfg.ccount},
		{"redis", "./adapters/redis", singleOps, cfg.benchtime, cfg.count},
		{"redis", "./adapters/redis", "^BenchmarkConcurrentAppend$", cfg.rbenchtime, cfg.ccount},
	}
}

// main parses the flags and runs the benchmarks.
func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "docs/benchmarks", "directory to write the charts and results into")
	flag.StringVar(&cfg.benchtime, "benchtime", "2000x", "-benchtime of the single-operation benchmarks")
	flag.IntVar(&cfg.count, "count", 3, "-count of the single-operation benchmarks (each metric: median of the runs)")
	flag.StringVar(&cfg.cbenchtime, "cbenchtime", "4000x", "-benchtime of SQLite's BenchmarkConcurrentAppend (batches)")
	flag.StringVar(&cfg.rbenchtime, "rbenchtime", "200x", "-benchtime of Redis's BenchmarkConcurrentAppend (rounds of 16×20 batches per side)")
	flag.IntVar(&cfg.ccount, "ccount", 1, "-count of the concurrent benchmarks")
	flag.StringVar(&cfg.from, "from", "", "redraw the outputs from this results.json instead of running the benchmarks")
	flag.BoolVar(&cfg.quick, "quick", false, "a reduced run to try it out: 200x (Redis concurrent: 20x), count 1, SQLite writers 1 and 16 only")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "benchchart: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if cfg.quick {
		cfg.benchtime, cfg.count, cfg.cbenchtime, cfg.rbenchtime, cfg.ccount = "200x", 1, "200x", "20x", 1
	}
	run := run
	if cfg.from != "" {
		run = redraw
	}
	if err := run(cfg, "go run ./internal/testkit/benchchart "+shellJoin(os.Args[1:])); err != nil {
		fmt.Fprintln(os.Stderr, "benchchart:", err)
		os.Exit(1)
	}
}

// run runs every job, then writes the outputs.
func run(cfg config, command string) error {
	start := time.Now()
	if _, err := os.Stat(filepath.FromSlash("adapters/sqlite/bench_test.go")); err != nil {
		return errors.New("run it from the module root (adapters/sqlite/bench_test.go not found)")
	}
	if os.Getenv("SESSIONS_REDIS_URL") == "" {
		if _, err := exec.LookPath("redis-server"); err != nil {
			return errors.New("redis-server not found in PATH: the Redis benchmarks need it " +
				"(install the Debian package redis-server, or set SESSIONS_REDIS_URL to a server to use)")
		}
	}
	m := meta{
		Date:    start.UTC().Format("2006-01-02 15:04 UTC"),
		CPU:     cpuModel(),
		Cores:   runtime.NumCPU(),
		Go:      runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Command: command,
		Quick:   cfg.quick,
	}
	var results []Result
	for _, j := range jobs(cfg) {
		rs, err := runJob(j)
		if err != nil {
			return err
		}
		m.GoTest = append(m.GoTest, j.String())
		results = append(results, rs...)
	}
	sortResults(results)
	written, err := writeOutputs(cfg.out, results, m)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchchart: %d benchmarks in %s; wrote:\n", len(results), time.Since(start).Round(time.Second))
	for _, p := range written {
		fmt.Fprintln(os.Stderr, "  "+p)
	}
	return nil
}

// redraw writes the outputs again from the results.json cfg.from names,
// with the date, machine and command recorded in it.
func redraw(cfg config, _ string) error {
	b, err := os.ReadFile(cfg.from)
	if err != nil {
		return err
	}
	var saved savedResults
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", cfg.from, err)
	}
	sortResults(saved.Results)
	written, err := writeOutputs(cfg.out, saved.Results, saved.Meta)
	for _, p := range written {
		fmt.Fprintln(os.Stderr, "benchchart: wrote", p)
	}
	return err
}

// runJob runs j, its output streamed to stderr, and returns the medians of
// its results. A failed run, or one without results, is an error.
func runJob(j job) ([]Result, error) {
	fmt.Fprintf(os.Stderr, "== %s\n", j)
	var out bytes.Buffer
	cmd := exec.Command("go", j.args()...)
	cmd.Stdout = io.MultiWriter(os.Stderr, &out)
	cmd.Stderr = os.Stderr
	// A backend that cannot start fails the run instead of skipping it.
	cmd.Env = append(os.Environ(), "SESSIONS_REQUIRE_BACKENDS=1")
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", j, err)
	}
	samples, err := Parse(&out)
	if err != nil {
		return nil, err
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results in its output", j)
	}
	return Medians(j.label, samples), nil
}

// meta says when, where and how the numbers were measured.
type meta struct {
	Date    string   `json:"date"`
	CPU     string   `json:"cpu"`
	Cores   int      `json:"cores"`
	Go      string   `json:"go"`
	Command string   `json:"command"`
	GoTest  []string `json:"go_test"`
	Quick   bool     `json:"quick"`
}

// machine describes the machine in one line.
func (m meta) machine() string {
	return fmt.Sprintf("%s, %d cores, %s", m.CPU, m.Cores, m.Go)
}

// footer returns the footer lines of a chart.
func (m meta) footer() []string {
	second := m.Command
	if m.Quick {
		second = "quick run (numbers indicative only): " + second
	}
	return []string{"Measured " + m.Date + " on " + m.machine(), second}
}

// cpuModel returns the "model name" of /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for l := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

// shellJoin quotes args for a POSIX shell where they need it.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// aliases maps each metric to the units the benchmarks report it under:
// the SQLite ones say "lib", the Redis ones "adapter".
var aliases = map[string][]string{
	"lib-ns/op":        {"lib-ns/op", "adapter-ns/op"},
	"x-raw":            {"x-raw", "ratio"},
	"lib-allocs/op":    {"lib-allocs/op", "adapter-allocs/op"},
	"lib-batches/s":    {"lib-batches/s", "adapter-batches/s"},
	"x-raw-throughput": {"x-raw-throughput", "throughput-ratio"},
}

// metric returns r's value of the metric name, under any of its aliases.
func (r Result) metric(name string) (float64, bool) {
	for _, unit := range append([]string{name}, aliases[name]...) {
		if v, ok := r.Metrics[unit]; ok {
			return v, true
		}
	}
	return 0, false
}

// label names r in charts: "sqlite Append20 sync=normal".
func (r Result) label() string {
	return r.Pkg + " " + strings.ReplaceAll(strings.TrimPrefix(r.Name, "Benchmark"), "/", " ")
}

// isThroughput reports whether r is a concurrent (batches/s) benchmark.
func (r Result) isThroughput() bool {
	_, ok := r.Metrics["raw-batches/s"]
	return ok
}

// savedResults is the content of results.json.
type savedResults struct {
	Meta    meta     `json:"meta"`
	Results []Result `json:"results"`
}

// writeOutputs writes the charts, results.md and results.json into dir
// and returns their paths.
func writeOutputs(dir string, rs []Result, m meta) ([]string, error) {
	files := map[string][]byte{}
	var order []string
	add := func(name string, b []byte) { files[name] = b; order = append(order, name) }

	add("library-vs-raw.svg", ratioSVG(rs, m))
	if b := groupCommitSVG(rs, m); b != nil {
		add("group-commit.svg", b)
	}
	if b := redisConcurrentSVG(rs, m); b != nil {
		add("redis-concurrent.svg", b)
	}
	add("results.md", resultsMD(rs, m))
	js, err := json.MarshalIndent(savedResults{m, rs}, "", "  ")
	if err != nil {
		return nil, err
	}
	add("results.json", append(js, '\n'))

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, name := range order {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// ratioSVG draws library time ÷ raw time of every single operation.
func ratioSVG(rs []Result, m meta) []byte {
	var bars []hbar
	prev := ""
	for _, r := range rs {
		x, ok := r.metric("x-raw")
		if !ok || r.isThroughput() {
			continue
		}
		col := colLib
		if x > target {
			col = colOver
		}
		bars = append(bars, hbar{Label: r.label(), Value: x, Text: fmt.Sprintf("%.2f", x), Color: col, Gap: r.Pkg != prev})
		prev = r.Pkg
	}
	return hbarChart("Library vs raw driver: time per operation",
		fmt.Sprintf("Library time ÷ raw-driver time for the same operation, measured in the same run (lower is better; red: above the %.2f target).", target),
		"library time ÷ raw time",
		bars,
		[]refLine{{X: 1, Label: "raw 1.00", Anchor: "end"}, {X: target, Label: fmt.Sprintf("target %.2f", target), Dashed: true, Anchor: "start"}},
		func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
		m)
}

// groupCommitSVG draws SQLite's concurrent appends, batches/s against
// writers; nil without such results.
func groupCommitSVG(rs []Result, m meta) []byte {
	var ss []series
	for _, mode := range []string{"full", "normal"} {
		col := map[string]string{"full": colFull, "normal": colNormal}[mode]
		lib := series{Name: "library, sync=" + strings.ToUpper(mode), Color: col}
		raw := series{Name: "raw driver, sync=" + strings.ToUpper(mode), Color: col, Dashed: true}
		for _, r := range rs {
			var w int
			if r.Pkg != "sqlite" || !r.isThroughput() {
				continue
			}
			if _, err := fmt.Sscanf(strings.TrimPrefix(r.Name, "BenchmarkConcurrentAppend/sync="+mode+"/"), "writers=%d", &w); err != nil {
				continue
			}
			l, _ := r.metric("lib-batches/s")
			lib.Points = append(lib.Points, point{float64(w), l})
			raw.Points = append(raw.Points, point{float64(w), r.Metrics["raw-batches/s"]})
		}
		if len(lib.Points) > 0 {
			ss = append(ss, lib, raw)
		}
	}
	if len(ss) == 0 {
		return nil
	}
	return lineChart("SQLite: concurrent appends, group commit vs one transaction per batch",
		"W writers append 5-item batches, each to its own session. Library: one Store (group commit). Raw: a connection and a transaction per batch per writer.",
		"writers (goroutines), log₂ scale", "batches per second (higher is better)",
		[]float64{1, 2, 4, 8, 16, 32}, ss, m)
}

// redisConcurrentSVG draws Redis's concurrent appends, raw and library
// batches/s for each case; nil without such results. The Redis benchmark
// has a fixed 16 writers, so it is a bar chart, not a line chart.
func redisConcurrentSVG(rs []Result, m meta) []byte {
	var bars []hbar
	for _, r := range rs {
		if r.Pkg != "redis" || !r.isThroughput() {
			continue
		}
		_, sub, _ := strings.Cut(r.Name, "/")
		raw := r.Metrics["raw-batches/s"]
		lib, _ := r.metric("lib-batches/s")
		x, _ := r.metric("x-raw-throughput")
		bars = append(bars,
			hbar{Label: sub + ": raw driver", Value: raw, Text: groupDigits(raw), Color: colRaw, Gap: true},
			hbar{Label: sub + ": library", Value: lib, Text: fmt.Sprintf("%s (×%.2f)", groupDigits(lib), x), Color: colLib})
	}
	if len(bars) == 0 {
		return nil
	}
	return hbarChart("Redis: concurrent appends, library vs raw driver",
		"16 goroutines append 5-item batches (own-sessions: one session each; one-session: all to one). Raw: one RPUSH per batch. (×: library ÷ raw)",
		"batches per second (higher is better)", bars, nil, groupDigits, m)
}

// resultsMD returns results.md: when, where, how, and a table of every
// benchmark.
func resultsMD(rs []Result, m meta) []byte {
	var b strings.Builder
	b.WriteString("# Benchmarks: library vs raw driver\n\n")
	if m.Quick {
		b.WriteString("**Quick run**: reduced iterations, numbers indicative only.\n\n")
	}
	fmt.Fprintf(&b, "- Date: %s\n- Machine: %s\n- Command: `%s`\n- go test runs:\n", m.Date, m.machine(), m.Command)
	for _, c := range m.GoTest {
		fmt.Fprintf(&b, "  - `%s`\n", c)
	}
	b.WriteString("\nEach number is the median over the runs (-count) of the benchmark's own metric. " +
		"lib ÷ raw: library time over raw-driver time (lower is better); for throughput, library batches/s over raw batches/s (higher is better). " +
		"Both packages time single operations interleaved with the raw side, one by one, and report medians (see each package's bench_test.go).\n\n")

	b.WriteString("## Single operations\n\n| package | benchmark | raw ns/op | lib ns/op | lib ÷ raw | raw allocs/op | lib allocs/op |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		if r.isThroughput() {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Pkg, strings.TrimPrefix(r.Name, "Benchmark"),
			cell(r, "raw-ns/op", groupDigits), cell(r, "lib-ns/op", groupDigits), cell(r, "x-raw", fixed(2)),
			cell(r, "raw-allocs/op", fixed(1)), cell(r, "lib-allocs/op", fixed(1)))
	}
	b.WriteString("\n## Concurrent appends\n\n| package | benchmark | raw batches/s | lib batches/s | lib ÷ raw | batches/tx |\n|---|---|--:|--:|--:|--:|\n")
	for _, r := range rs {
		if !r.isThroughput() {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Pkg, strings.TrimPrefix(r.Name, "Benchmark"),
			cell(r, "raw-batches/s", groupDigits), cell(r, "lib-batches/s", groupDigits),
			cell(r, "x-raw-throughput", fixed(2)), cell(r, "batches/tx", fixed(2)))
	}
	return []byte(b.String())
}

// cell formats r's metric name with f, or "–" when r lacks it.
func cell(r Result, name string, f func(float64) string) string {
	if v, ok := r.metric(name); ok {
		return f(v)
	}
	return "–"
}

// fixed returns a formatter with d decimals.
func fixed(d int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', d, 64) }
}
