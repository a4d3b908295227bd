package conformance

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options tunes a run of the suite.
type Options struct {
	// Run, when set, runs only clauses whose name matches it.
	Run *regexp.Regexp
	// IDPrefix starts every session id the suite creates.
	IDPrefix string
	// Timeout bounds each clause; zero means two minutes.
	Timeout time.Duration
	// NativeOnly skips Run's second pass with capabilities hidden.
	NativeOnly bool
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 2 * time.Minute
	}
	return o.Timeout
}

func selected(opts Options) []clause {
	var out []clause
	for _, cl := range clauses() {
		if opts.Run != nil && !opts.Run.MatchString(cl.name) {
			continue
		}
		out = append(out, cl)
	}
	return out
}

// Run runs every clause of the suite as subtests of t, twice: "native"
// against the harness as it is, and "capabilities-hidden" against the same
// store with every optional capability hidden (HideCapabilities), which must
// give identical results for every base and run-state clause. It logs both
// reports and returns the native one. Clauses of capabilities the harness
// does not declare are skipped.
func Run(t *testing.T, h Harness, opts Options) *Report {
	t.Helper()
	var native, hidden *Report
	t.Run("native", func(t *testing.T) { native = runMode(t, h, opts) })
	if opts.NativeOnly {
		return native
	}
	t.Run("capabilities-hidden", func(t *testing.T) { hidden = runMode(t, HideCapabilities(h), opts) })
	for _, d := range sameOutcomes(native, hidden) {
		t.Errorf("conformance %s: native and capabilities-hidden runs differ: %s", h.Name(), d)
	}
	return native
}

// sameOutcomes lists the base and run-state clauses whose status differs
// between two reports.
func sameOutcomes(a, b *Report) []string {
	if a == nil || b == nil {
		return nil
	}
	status := map[string]Status{}
	for _, c := range b.Clauses {
		status[c.Name] = c.Status
	}
	var diffs []string
	for _, c := range a.Clauses {
		if c.Group != GroupBase && c.Group != GroupRunState {
			continue
		}
		if c.Name == "capabilities/implemented-declared" || c.Name == "capabilities/declared-implemented" {
			continue
		}
		if other, ok := status[c.Name]; ok && other != c.Status && !(c.Status == StatusSkip || other == StatusSkip) {
			diffs = append(diffs, fmt.Sprintf("%s: %s vs %s", c.Name, c.Status, other))
		}
	}
	return diffs
}

func runMode(t *testing.T, h Harness, opts Options) *Report {
	t.Helper()
	rep := newReport(h)
	for _, cl := range selected(opts) {
		start := time.Now()
		var res ClauseResult
		t.Run(cl.name, func(t *testing.T) {
			rec := &recorder{inner: t}
			defer func() { res = rec.result() }()
			if cl.needs != 0 && !h.Declared().Has(cl.needs) {
				rec.Skipf("capability %s not declared", cl.needs)
			}
			ctx, cancel := context.WithTimeout(context.Background(), opts.timeout())
			defer cancel()
			c := newC(ctx, rec, h, opts, cl.name)
			defer c.cleanup()
			cl.run(c)
		})
		res.Name, res.Group, res.Duration = cl.name, cl.group, time.Since(start)
		rep.add(res)
	}
	rep.finish()
	t.Logf("conformance %s: %s", h.Name(), rep.Summary())
	return rep
}

// Check runs every clause without the testing package and returns the
// report. Each clause runs in its own goroutine; a failed assertion ends the
// clause, as t.FailNow does.
func Check(ctx context.Context, h Harness, opts Options) *Report {
	rep := newReport(h)
	for _, cl := range selected(opts) {
		start := time.Now()
		res := ClauseResult{Name: cl.name, Group: cl.group}
		if cl.needs != 0 && !h.Declared().Has(cl.needs) {
			res.Status, res.Message = StatusSkip, fmt.Sprintf("capability %s not declared", cl.needs)
			rep.add(res)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, opts.timeout())
		rec := &recorder{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if p := recover(); p != nil {
					rec.Errorf("panic: %v", p)
				}
			}()
			c := newC(cctx, rec, h, opts, cl.name)
			defer c.cleanup()
			cl.run(c)
		}()
		<-done
		cancel()
		r := rec.result()
		res.Status, res.Message, res.Duration = r.Status, r.Message, time.Since(start)
		rep.add(res)
	}
	rep.finish()
	return rep
}

// recorder collects a clause's outcome. With an inner reporter (go test) it
// forwards every call; without one (Check) FailNow and Skipf end the
// clause's goroutine.
type recorder struct {
	inner   reporter
	mu      sync.Mutex
	failed  bool
	skipped bool
	msgs    []string
}

func (r *recorder) Helper() {
	if r.inner != nil {
		r.inner.Helper()
	}
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	if r.inner != nil {
		r.inner.Helper()
		r.inner.Errorf(format, args...)
	}
}

func (r *recorder) FailNow() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	if r.inner != nil {
		r.inner.FailNow()
	}
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	if r.inner != nil {
		r.inner.Skipf(format, args...)
	}
	runtime.Goexit()
}

func (r *recorder) Logf(format string, args ...any) {
	if r.inner != nil {
		r.inner.Logf(format, args...)
	}
}

func (r *recorder) result() ClauseResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := ClauseResult{Status: StatusPass, Message: strings.Join(r.msgs, "; ")}
	switch {
	case r.failed:
		res.Status = StatusFail
	case r.skipped:
		res.Status = StatusSkip
	}
	return res
}

func sortedGroups(m map[Group]*groupTally) []Group {
	out := make([]Group, 0, len(m))
	for g := range m {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
