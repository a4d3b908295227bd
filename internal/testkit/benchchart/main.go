// Command benchchart runs the adapters' single-operation benchmarks on all
// four backends (SQLite, PostgreSQL, Redis, Mongo-wire), each operation
// interleaved op by op with the tightest raw-driver code for the same work,
// the crash-safe save benchmark (runstate's BenchmarkRunTurnRatio) and the
// SQLite and Redis concurrent appends, and writes their numbers as charts
// and tables:
//
//	go run ./internal/testkit/benchchart [-out docs/benchmarks] [-benchtime 1000x] [-count 6] [-quick]
//
// Every ratio is taken inside one run (the medians of interleaved calls);
// the tables give, over the -count runs, the median ratio and the smallest
// and largest one: median [min–max]. The machine (CPU, cores, Go, kernel)
// and its load average before and after each go test run are recorded.
// With -from results.json it only redraws the outputs from saved numbers.
//
// It writes, into -out: library-vs-raw.svg (library time ÷ raw time of
// each single operation, with the spread of the runs), group-commit.svg
// (SQLite concurrent appends, batches/s against writers),
// redis-concurrent.svg (Redis concurrent appends), results.md and
// results.json. Run it from the module root. The server backends come from
// internal/testkit/testservers (redis-server, initdb/postgres and FerretDB
// in PATH, or the SESSIONS_* variables); a backend that cannot start fails
// the run.
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
	"slices"
	"strconv"
	"strings"
	"time"
)

// target is the project's goal for library time ÷ raw time.
const target = 1.15

// saveTarget is the project's goal for a crash-safe save ÷ a plain append.
const saveTarget = 1.2

// config holds the command-line settings.
type config struct {
	out         string
	benchtime   string // single operations on SQLite, PostgreSQL and Redis
	mbenchtime  string // single operations on Mongo-wire
	sbenchtime  string // runstate's BenchmarkRunTurnRatio on SQLite, PostgreSQL and Redis
	msbenchtime string // runstate's BenchmarkRunTurnRatio on Mongo-wire
	count       int
	cbenchtime  string // SQLite BenchmarkConcurrentAppend, in batches
	rbenchtime  string // Redis BenchmarkConcurrentAppend, in rounds of 16×20 batches per side
	ccount      int    // both concurrent benchmarks
	quick       bool
	from        string // results.json to redraw from, instead of running the benchmarks
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

// mongoLatest selects Mongo-wire's latest 50 of 1k only (on FerretDB the
// 100k case takes seconds per call, see adapters/mongo/bench_test.go); a
// second job, because a pattern with a sub-benchmark part does not run a
// benchmark that has none (Append20, Pop).
const mongoLatest = "^BenchmarkLatest50$/^history=1000$"

// jobs returns the go test runs of cfg.
func jobs(cfg config) []job {
	sqliteConc := "^BenchmarkConcurrentAppend$"
	if cfg.quick {
		sqliteConc += "/^sync=(full|normal)$/^writers=(1|16)$"
	}
	return []job{
		{"sqlite", "./adapters/sqlite", singleOps, cfg.benchtime, cfg.count},
		{"postgres", "./adapters/postgres", singleOps, cfg.benchtime, cfg.count},
		{"redis", "./adapters/redis", singleOps, cfg.benchtime, cfg.count},
		{"mongo", "./adapters/mongo", "^(BenchmarkAppend20|BenchmarkPop)$", cfg.mbenchtime, cfg.count},
		{"mongo", "./adapters/mongo", mongoLatest, cfg.mbenchtime, cfg.count},
		{"runstate", "./runstate", "^BenchmarkRunTurnRatio$/^(sqlite|postgres|redis)", cfg.sbenchtime, cfg.count},
		{"runstate", "./runstate", "^BenchmarkRunTurnRatio$/^mongo$", cfg.msbenchtime, cfg.count},
		{"sqlite", "./adapters/sqlite", sqliteConc, cfg.cbenchtime, cfg.ccount},
		{"redis", "./adapters/redis", "^BenchmarkConcurrentAppend$", cfg.rbenchtime, cfg.ccount},
	}
}

// main parses the flags and runs the benchmarks.
func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "docs/benchmarks", "directory to write the charts and results into")
	flag.StringVar(&cfg.benchtime, "benchtime", "1000x", "-benchtime of the single-operation benchmarks of SQLite, PostgreSQL and Redis")
	flag.StringVar(&cfg.mbenchtime, "mbenchtime", "200x", "-benchtime of the Mongo-wire single-operation benchmarks")
	flag.StringVar(&cfg.sbenchtime, "sbenchtime", "200x", "-benchtime of runstate's BenchmarkRunTurnRatio (crash-safe save ÷ append) on SQLite, PostgreSQL and Redis")
	flag.StringVar(&cfg.msbenchtime, "msbenchtime", "50x", "-benchtime of runstate's BenchmarkRunTurnRatio on Mongo-wire (its digest path takes 0.1–0.5 s a turn on FerretDB)")
	flag.IntVar(&cfg.count, "count", 6, "-count of the single-operation and save benchmarks (each ratio: median [min–max] of the runs)")
	flag.StringVar(&cfg.cbenchtime, "cbenchtime", "4000x", "-benchtime of SQLite's BenchmarkConcurrentAppend (batches)")
	flag.StringVar(&cfg.rbenchtime, "rbenchtime", "200x", "-benchtime of Redis's BenchmarkConcurrentAppend (rounds of 16×20 batches per side)")
	flag.IntVar(&cfg.ccount, "ccount", 1, "-count of the concurrent benchmarks")
	flag.StringVar(&cfg.from, "from", "", "redraw the outputs from this results.json instead of running the benchmarks")
	flag.BoolVar(&cfg.quick, "quick", false, "a smoke run: 100x (Mongo-wire and save 20x, Mongo-wire save 10x, Redis concurrent 20x), count 2, SQLite writers 1 and 16 only")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "benchchart: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if cfg.quick {
		cfg.benchtime, cfg.mbenchtime, cfg.sbenchtime, cfg.msbenchtime, cfg.count = "100x", "20x", "20x", "10x", 2
		cfg.cbenchtime, cfg.rbenchtime, cfg.ccount = "200x", "20x", 1
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
	m := meta{
		Date:       start.UTC().Format("2006-01-02 15:04 UTC"),
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		Go:         goVersion(),
		Kernel:     kernel(),
		Command:    command,
		Quick:      cfg.quick,
		LoadBefore: loadAvg(),
	}
	var results []Result
	var failed []error
	for _, j := range jobs(cfg) {
		jm := jobMeta{Command: j.String(), LoadBefore: loadAvg()}
		t0 := time.Now()
		rs, err := runJob(j)
		if err != nil {
			// The other jobs still run and are written; the failure is
			// stated in results.md and fails the command at the end.
			jm.Failed = err.Error()
			failed = append(failed, err)
		}
		jm.LoadAfter, jm.Seconds = loadAvg(), int(time.Since(t0).Seconds())
		m.GoTest = append(m.GoTest, j.String())
		m.Jobs = append(m.Jobs, jm)
		results = append(results, rs...)
	}
	m.LoadAfter = loadAvg()
	sortResults(results)
	written, err := writeOutputs(cfg.out, results, m)
	if err != nil {
		return errors.Join(append(failed, err)...)
	}
	fmt.Fprintf(os.Stderr, "benchchart: %d benchmarks in %s; wrote:\n", len(results), time.Since(start).Round(time.Second))
	for _, p := range written {
		fmt.Fprintln(os.Stderr, "  "+p)
	}
	return errors.Join(failed...)
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
// its results. A failed run, or one without results, is an error; the
// results a failed run printed before it failed are returned with it.
func runJob(j job) ([]Result, error) {
	fmt.Fprintf(os.Stderr, "== %s\n", j)
	var out bytes.Buffer
	cmd := exec.Command("go", j.args()...)
	cmd.Stdout = io.MultiWriter(os.Stderr, &out)
	cmd.Stderr = os.Stderr
	// A backend that cannot start fails the run instead of skipping it.
	cmd.Env = append(os.Environ(), "SESSIONS_REQUIRE_BACKENDS=1")
	runErr := cmd.Run()
	samples, err := Parse(&out)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	if runErr != nil {
		// The go test output says which benchmark failed and why.
		var why []string
		for l := range strings.Lines(out.String()) {
			if t := strings.TrimSpace(l); strings.HasPrefix(t, "--- FAIL") || strings.Contains(t, "_test.go:") {
				why = append(why, t)
			}
		}
		return Medians(j.label, samples), fmt.Errorf("%s: %w: %s", j, runErr, strings.Join(why, "; "))
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results in its output", j)
	}
	return Medians(j.label, samples), nil
}

// meta says when, where and how the numbers were measured.
type meta struct {
	Date       string    `json:"date"`
	CPU        string    `json:"cpu"`
	Cores      int       `json:"cores"`
	Go         string    `json:"go"`
	Kernel     string    `json:"kernel,omitempty"`
	Command    string    `json:"command"`
	GoTest     []string  `json:"go_test"`
	Jobs       []jobMeta `json:"jobs,omitempty"`
	LoadBefore string    `json:"load_before,omitempty"` // /proc/loadavg's 1, 5 and 15 minute averages
	LoadAfter  string    `json:"load_after,omitempty"`
	Quick      bool      `json:"quick"`
}

// jobMeta is one go test run: its command line, the load average before
// and after it, and how long it took.
type jobMeta struct {
	Command    string `json:"command"`
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
	Seconds    int    `json:"seconds"`
	Failed     string `json:"failed,omitempty"` // why the run failed; its results printed before are kept
}

// machine describes the machine in one line.
func (m meta) machine() string {
	s := fmt.Sprintf("%s, %d cores, %s", m.CPU, m.Cores, m.Go)
	if m.Kernel != "" {
		s += ", Linux " + m.Kernel
	}
	return s
}

// load describes the load average in one line, "" when not recorded.
func (m meta) load() string {
	if m.LoadBefore == "" {
		return ""
	}
	return "load average (1/5/15 min) " + m.LoadBefore + " before, " + m.LoadAfter + " after"
}

// footer returns the footer lines of a chart.
func (m meta) footer() []string {
	second := m.Command
	if m.Quick {
		second = "quick run (numbers indicative only): " + second
	}
	first := "Measured " + m.Date + " on " + m.machine()
	if l := m.load(); l != "" {
		first += "; " + l
	}
	return []string{first, second}
}

// goVersion returns `go env GOVERSION` (the toolchain the benchmarks run
// with), or this program's version when that fails.
func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	v := strings.TrimSpace(string(out))
	if err != nil || v == "" {
		v = runtime.Version()
	}
	return v + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// kernel returns the kernel release, or "".
func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// loadAvg returns the 1, 5 and 15 minute load averages of /proc/loadavg,
// "1.02 0.87 0.60", or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
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
	sp, ok := r.spreadOf(name)
	return sp.Median, ok
}

// spreadOf returns r's Spread of the metric name, under any of its aliases.
func (r Result) spreadOf(name string) (Spread, bool) {
	for _, unit := range append([]string{name}, aliases[name]...) {
		if sp, ok := r.spread(unit); ok {
			return sp, true
		}
	}
	return Spread{}, false
}

// isSave reports whether r is a crash-safe save benchmark (runstate).
func (r Result) isSave() bool { return r.Pkg == "runstate" }

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

// ratioSVG draws library time ÷ raw time of every single operation: the
// median of the runs' ratios as the bar, their range as the whisker; for
// a benchmark with a raw side on the library's schema (x-raw-schema), a
// second bar.
func ratioSVG(rs []Result, m meta) []byte {
	var bars []hbar
	prev := ""
	for _, r := range rs {
		if r.isThroughput() || r.isSave() {
			continue
		}
		for _, side := range []struct{ metric, suffix string }{{"x-raw", ""}, {"x-raw-schema", " (vs raw on its schema)"}} {
			sp, ok := r.spreadOf(side.metric)
			if !ok {
				continue
			}
			col := colLib
			if sp.Median > target {
				col = colOver
			}
			bars = append(bars, hbar{Label: r.label() + side.suffix, Value: sp.Median, Text: spreadText(sp, 2),
				Color: col, Gap: r.Pkg != prev, Lo: sp.Min, Hi: sp.Max})
			prev = r.Pkg
		}
	}
	return hbarChart("Library vs raw driver: time per operation",
		fmt.Sprintf("Library time ÷ raw-driver time, interleaved op by op in each run; bar: median of the runs, whisker: min–max (lower is better; red: median above %.2f).", target),
		"library time ÷ raw time",
		bars,
		[]refLine{{X: 1, Label: "raw 1.00", Anchor: "end"}, {X: target, Label: fmt.Sprintf("target %.2f", target), Dashed: true, Anchor: "start"}},
		func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
		m)
}

// spreadText formats sp as "1.03 [0.98–1.10]" with d decimals, or the
// median alone when every run gave the same value.
func spreadText(sp Spread, d int) string {
	f := fixed(d)
	if f(sp.Min) == f(sp.Max) {
		return f(sp.Median)
	}
	return f(sp.Median) + " [" + f(sp.Min) + "–" + f(sp.Max) + "]"
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

// rawSides says, per package, what its raw sides do (see each
// package's bench_test.go for the code).
var rawSides = [][2]string{
	{"sqlite", "append: one prepared 20-row INSERT in autocommit (raw); BEGIN IMMEDIATE, session upsert, the 20-row INSERT, COMMIT (raw-schema). " +
		"latest: one prepared SELECT ... ORDER BY id DESC LIMIT 50 scanned into strings. pop: one prepared DELETE ... RETURNING in autocommit. Each writer on a file of its own."},
	{"postgres", "raw: a minimal table (id BIGSERIAL PRIMARY KEY, session_id, message_data; index (session_id, id)); raw-schema: the adapter's Python-compatible tables, in its (created_at, id) order. " +
		"append: one prepared 20-row INSERT ... VALUES in autocommit (raw-schema: with the session upsert, one batch). latest: session_id >= $1 AND session_id <= $1 ORDER BY ... DESC LIMIT 50, scanned into strings. pop: one DELETE ... RETURNING."},
	{"redis", "append: one RPUSH (with a TTL: RPUSH and two PEXPIRE, pipelined). latest: LRANGE -50 -1. pop: RPOP."},
	{"mongo", "a collection of its own, one document per batch under a driver-made ObjectId, index {session_id, _id}. append: one InsertOne (raw-schema: on the adapter's layout, the session document's $inc then the InsertOne). latest: one Find sorted by _id descending, limited to the documents that hold 50 items, decoded into strings. pop: one FindOneAndUpdate $pop. Server: FerretDB."},
}

// resultsMD returns results.md: when, where, how, and a table of every
// benchmark.
func resultsMD(rs []Result, m meta) []byte {
	var b strings.Builder
	b.WriteString("# Benchmarks: library vs raw driver\n\n")
	if m.Quick {
		b.WriteString("**Quick run**: reduced iterations, numbers indicative only.\n\n")
	}
	fmt.Fprintf(&b, "- Date: %s\n- Machine: %s\n", m.Date, m.machine())
	if l := m.load(); l != "" {
		fmt.Fprintf(&b, "- Load: %s (the machine is shared; the interleaved ratios, not the absolute times, are what to read)\n", l)
	}
	fmt.Fprintf(&b, "- Command: `%s`\n- go test runs (load average before → after, duration):\n", m.Command)
	if len(m.Jobs) > 0 {
		for _, j := range m.Jobs {
			fmt.Fprintf(&b, "  - `%s` (%s → %s, %ds)\n", j.Command, j.LoadBefore, j.LoadAfter, j.Seconds)
			if j.Failed != "" {
				fmt.Fprintf(&b, "    - **FAILED** (the results it printed before are kept): %s\n", j.Failed)
			}
		}
	} else {
		for _, c := range m.GoTest {
			fmt.Fprintf(&b, "  - `%s`\n", c)
		}
	}
	b.WriteString("\nEvery single operation is timed interleaved with the raw-driver code for the same work, call by call in one loop, the order rotating every round " +
		"(internal/testkit/interleave); each run reports the median time of each side and their ratio. " +
		"A ratio cell is **median [min–max] of the per-run ratios** over the runs (-count); the ns/op cells are medians over the runs. " +
		"lib ÷ raw: library time over the tightest raw code (lower is better); lib ÷ raw-schema: over raw code on the library's own schema where that differs.\n\n")
	b.WriteString("Raw sides:\n\n")
	for _, rsd := range rawSides {
		fmt.Fprintf(&b, "- %s: %s\n", rsd[0], rsd[1])
	}

	b.WriteString("\n## Single operations\n\n| backend | benchmark | runs | raw ns/op | lib ns/op | lib ÷ raw | lib ÷ raw-schema | raw allocs/op | lib allocs/op |\n|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		if r.isThroughput() || r.isSave() {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", r.Pkg, strings.TrimPrefix(r.Name, "Benchmark"), r.Runs,
			cell(r, "raw-ns/op", groupDigits), cell(r, "lib-ns/op", groupDigits), spreadCell(r, "x-raw"), spreadCell(r, "x-raw-schema"),
			cell(r, "raw-allocs/op", fixed(1)), cell(r, "lib-allocs/op", fixed(1)))
	}
	fmt.Fprintf(&b, "\n## Crash-safe save\n\nrunstate's Run.Turn (Save with Register) of a 20-item turn ÷ a plain AddItems of the same turn, interleaved on twin sessions (twin files on SQLite); target ≤ %.2f. "+
		"atomic: the checkpoint committed with the append in one transaction (session.CheckpointCommitter); digest: the checkpoint saved before the append, the tail read, the checkpoint saved after (the only path on Mongo-wire).\n\n", saveTarget)
	b.WriteString("| backend | runs | append µs | atomic µs | atomic ÷ append | digest µs | digest ÷ append |\n|---|--:|--:|--:|--:|--:|--:|\n")
	var saves []Result
	for _, r := range rs {
		if r.isSave() {
			saves = append(saves, r)
		}
	}
	// SQLite, PostgreSQL, Redis, then Mongo-wire, as in the other tables.
	rank := func(r Result) int {
		_, sub, _ := strings.Cut(r.Name, "/")
		for i, p := range []string{"sqlite", "postgres", "redis", "mongo"} {
			if strings.HasPrefix(sub, p) {
				return i
			}
		}
		return 4
	}
	slices.SortStableFunc(saves, func(a, b Result) int { return rank(a) - rank(b) })
	for _, r := range saves {
		_, sub, _ := strings.Cut(r.Name, "/")
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", sub, r.Runs,
			cell(r, "append-µs", groupDigits), cell(r, "atomic-µs", groupDigits), spreadCell(r, "atomic/append"),
			cell(r, "digest-µs", groupDigits), spreadCell(r, "digest/append"))
	}
	b.WriteString("\n## Concurrent appends\n\n| package | benchmark | runs | raw batches/s | lib batches/s | lib ÷ raw | batches/tx |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, r := range rs {
		if !r.isThroughput() {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", r.Pkg, strings.TrimPrefix(r.Name, "Benchmark"), r.Runs,
			cell(r, "raw-batches/s", groupDigits), cell(r, "lib-batches/s", groupDigits),
			spreadCell(r, "x-raw-throughput"), cell(r, "batches/tx", fixed(2)))
	}
	return []byte(b.String())
}

// spreadCell formats r's metric name as "median [min–max]" with 2
// decimals, or "–" when r lacks it.
func spreadCell(r Result, name string) string {
	if sp, ok := r.spreadOf(name); ok {
		return spreadText(sp, 2)
	}
	return "–"
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
