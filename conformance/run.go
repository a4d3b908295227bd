package conformance

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/agentsessions/sessions/conformance/contract"
	"github.com/agentsessions/sessions/conformance/heldwrite"
	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// Options tunes a run of the suite.
type Options struct {
	// Run, when set, runs only clauses whose name matches it. A part whose
	// base clauses did not all run grades NONE.
	Run *regexp.Regexp
	// RunID names the run in the probe namespace: every session id starts
	// with ProbePrefix + RunID + ":". Empty means a random one.
	RunID string
	// Timeout bounds each clause; zero means two minutes.
	Timeout time.Duration
	// NativeOnly skips the contract's second pass with capabilities hidden.
	NativeOnly bool
}

// The parts of the suite, in the order they run.
const (
	PartContract       = "contract"                       // the Session contract, on the harness as it is
	PartContractHidden = "contract (capabilities hidden)" // the contract through HideCapabilities: the legacy fallback
	PartHeldWrite      = "held-write"                     // held-write settlement: runstate's scripted agent loop
)

// part is one list of clauses run on one view of the harness.
type part struct {
	name, tag string
	clauses   func() []suite.Clause
	harness   func(Harness) suite.Harness
	// standard are the capabilities the part needs for FULL.
	standard session.Capabilities
	// base is the part's required group.
	base Group
}

func parts(opts Options) []part {
	native := func(h Harness) suite.Harness { return h }
	ps := []part{{PartContract, "contract", contract.Clauses, native, StandardCapabilities, GroupBase}}
	if !opts.NativeOnly {
		ps = append(ps, part{PartContractHidden, "hidden", contract.Clauses,
			func(h Harness) suite.Harness { return contract.HideCapabilities(h) }, StandardCapabilities, GroupBase})
	}
	return append(ps, part{PartHeldWrite, "held-write", heldwrite.Clauses, native, 0, GroupHeldWrite})
}

func (o Options) suite(run string, p part) suite.Options {
	return suite.Options{Run: o.Run, Timeout: o.Timeout, Namespace: suite.NewNamespace(run, p.tag)}
}

func (o Options) runID() string {
	if o.RunID != "" {
		return o.RunID
	}
	return suite.NewRunID()
}

// HideCapabilities returns a harness whose sessions show only the methods
// of session.Session and that declares no capability, so the contract runs
// through the session package's fallbacks, as a caller holding a plain
// Session (the legacy no-argument path) does. Run and Check grade this as
// the part "contract (capabilities hidden)".
func HideCapabilities(h Harness) Harness { return contract.HideCapabilities(h) }

// Run runs the whole suite on h as subtests of t, one per part: the
// contract natively, the contract with capabilities hidden (unless
// opts.NativeOnly), and held-write settlement. Each base or held-write
// clause must give the same outcome natively and with capabilities hidden.
// It logs the report and returns it.
func Run(t *testing.T, h Harness, opts Options) *Report {
	t.Helper()
	run := opts.runID()
	rep := newReport(h)
	for _, p := range parts(opts) {
		var res []suite.Result
		t.Run(p.tag, func(t *testing.T) { res = suite.Run(t, p.harness(h), p.clauses(), opts.suite(run, p)) })
		rep.add(p, h, res)
	}
	rep.finish()
	for _, d := range rep.differences() {
		t.Errorf("conformance %s: native and capabilities-hidden contract differ: %s", h.Name(), d)
	}
	t.Logf("conformance %s: %s", h.Name(), rep.Summary())
	return rep
}

// Check runs the whole suite on h without the testing package, as Run
// does, and returns the report. Once ctx is done the clauses left are
// reported skipped; every session a clause wrote is cleared all the same.
func Check(ctx context.Context, h Harness, opts Options) *Report {
	run := opts.runID()
	rep := newReport(h)
	for _, p := range parts(opts) {
		rep.add(p, h, suite.Check(ctx, p.harness(h), p.clauses(), opts.suite(run, p)))
	}
	rep.finish()
	return rep
}

// differences lists the base clauses whose outcome differs between the
// native and the capabilities-hidden contract.
func (r *Report) differences() []string {
	native, hidden := r.Part(PartContract), r.Part(PartContractHidden)
	if native == nil || hidden == nil {
		return nil
	}
	status := map[string]Status{}
	for _, c := range hidden.Clauses {
		status[c.Name] = c.Status
	}
	var diffs []string
	for _, c := range native.Clauses {
		if c.Group != GroupBase || c.Name == "capabilities/implemented-declared" || c.Name == "capabilities/declared-implemented" {
			continue
		}
		if other, ok := status[c.Name]; ok && other != c.Status && c.Status != StatusSkip && other != StatusSkip {
			diffs = append(diffs, fmt.Sprintf("%s: %s vs %s", c.Name, c.Status, other))
		}
	}
	return diffs
}
