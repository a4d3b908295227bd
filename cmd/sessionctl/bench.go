package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["bench"] = command{"measure append, latest-N and pop on a store (default: embedded SQLite)", runBench}
}

// runBench times the operations an agent loop makes on a store of the
// user's own, in a session of its own that it clears afterwards. For ratios
// against the raw drivers, run `make bench`.
func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench", "[URL]")
	n := fs.Int("n", 200, "operations per measurement")
	history := fs.Int("history", 1000, "items in the session before reads are timed")
	batch := fs.Int("batch", 20, "items per appended batch")
	latest := fs.Int("latest", 50, "N of the latest-N read")
	sf := addStoreFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 || *n <= 0 || *history < 0 || *batch <= 0 || *latest <= 0 {
		return usagef("want at most one store URL and positive -n, -batch, -latest")
	}
	dsn, mode := "", readWrite
	if len(pos) == 1 {
		dsn = pos[0]
	} else {
		mode = create
		dir, err := os.MkdirTemp("", "sessionctl-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dsn = "sqlite://" + filepath.Join(dir, "sessions.db")
	}
	st, _, err := openStore(ctx, dsn, mode, *sf.connectTimeout)
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Session(fmt.Sprintf("sessionctl-bench-%d", time.Now().UnixNano()))
	if err != nil {
		return err
	}
	defer session.Clear(context.WithoutCancel(ctx), s)

	item := func(i int) session.Item {
		return session.MustItem(fmt.Sprintf(`{"type":"message","role":"user","content":"benchmark item %d with some text to make it realistic"}`, i))
	}
	fill := make([]session.Item, 0, 1000)
	for i := 0; i < *history; i++ {
		fill = append(fill, item(i))
		if len(fill) == cap(fill) || i == *history-1 {
			if err := session.Append(ctx, s, fill); err != nil {
				return err
			}
			fill = fill[:0]
		}
	}
	b := make([]session.Item, *batch)
	for i := range b {
		b[i] = item(i)
	}
	rep := benchReport{Store: redactDSN(dsn), Operations: *n, History: *history}
	if !*sf.json {
		fmt.Fprintf(e.stdout, "store %s, %d operations each, history %d items\n", redactDSN(dsn), *n, *history)
		fmt.Fprintf(e.stdout, "%-22s %12s %12s %12s\n", "operation", "ops/s", "p50", "p99")
	}
	report := func(name string, op func() error) error {
		lat := make([]time.Duration, *n)
		start := time.Now()
		for i := range lat {
			t := time.Now()
			if err := op(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			lat[i] = time.Since(t)
		}
		total := time.Since(start)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r := benchResult{name, float64(*n) / total.Seconds(), lat[len(lat)/2].Microseconds(), lat[len(lat)*99/100].Microseconds()}
		rep.Results = append(rep.Results, r)
		if !*sf.json {
			fmt.Fprintf(e.stdout, "%-22s %12.0f %12s %12s\n", name, r.OpsPerSec,
				lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
		}
		e.setStatus("measured %d operations; the bench session is cleared on exit", len(rep.Results))
		return nil
	}
	if err := report(fmt.Sprintf("latest-%d", *latest), func() error {
		_, err := session.Latest(ctx, s, *latest)
		return err
	}); err != nil {
		return err
	}
	if err := report(fmt.Sprintf("append %d items", *batch), func() error { return session.Append(ctx, s, b) }); err != nil {
		return err
	}
	if err := report("pop", func() error {
		_, _, err := session.Pop(ctx, s)
		return err
	}); err != nil {
		return err
	}
	if *sf.json {
		return writeJSON(e, rep)
	}
	return nil
}

// benchReport is bench's -json output; latencies in microseconds.
type benchReport struct {
	Store      string        `json:"store"`
	Operations int           `json:"operations"`
	History    int           `json:"history"`
	Results    []benchResult `json:"results"`
}

type benchResult struct {
	Operation string  `json:"operation"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Micros int64   `json:"p50_us"`
	P99Micros int64   `json:"p99_us"`
}
