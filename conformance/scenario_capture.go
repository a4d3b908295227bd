package conformance

import (
	"fmt"
	"strings"
)

// capture is a reporter that records a failure instead of ending the
// clause, so one clause can run many cells (the fault matrix) or run a
// scenario whose failure is a known runstate bug.
type capture struct {
	failed bool
	msgs   []string
}

// captureAbort unwinds a captured body on FailNow.
type captureAbort struct{}

func (r *capture) Helper() {}
func (r *capture) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *capture) FailNow() {
	r.failed = true
	panic(captureAbort{})
}
func (r *capture) Skipf(format string, args ...any) {
	r.msgs = append(r.msgs, "skipped: "+fmt.Sprintf(format, args...))
	panic(captureAbort{})
}
func (r *capture) Logf(string, ...any) {}

// captured runs fn with a C whose failures are recorded, not reported, and
// returns whether it failed and what it said. Panics other than a failed
// assertion count as failures.
func captured(c *C, fn func(*C)) (failed bool, msg string) {
	r := &capture{}
	cc := newC(c.ctx, r, c.h, c.opts, strings.TrimPrefix(c.ns, c.opts.IDPrefix))
	defer func() {
		// The parent clears what the captured body opened.
		cc.mu.Lock()
		defer cc.mu.Unlock()
		for id := range cc.opened {
			c.track(id)
		}
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(captureAbort); !ok {
					r.failed = true
					r.msgs = append(r.msgs, fmt.Sprintf("panic: %v", p))
				}
			}
		}()
		fn(cc)
	}()
	return r.failed, strings.Join(r.msgs, "; ")
}

// knownRunStateBugs maps clauses that fail because of a runstate defect
// (not an adapter's) to the defect. Such a clause still runs; while it
// fails it is reported as skipped with the defect and the failure, and once
// runstate is fixed it passes by itself. strictRunState turns the skips
// back into failures (the package's own tests set it to prove the defects
// still reproduce).
var knownRunStateBugs = map[string]string{
	"runstate/partial-approval-one-batch/live": "runstate#folded-leak: the per-turn set of outputs folded by ExtendHeld survives " +
		"across runs on a live Checkpoint, so SaveResumedTurn of a later resume withdraws outputs an earlier run folded " +
		"(and their calls): the approved tool ran but neither its call nor its output reaches the Session",
	"runstate/emptied-turn-settles-pair/live": "runstate#emptied-turn: SaveResumedTurn with no resolved items withdraws every " +
		"output folded this turn, so the executed pair is lost instead of settling (spec §5.1.7)",
	"runstate/emptied-turn-settles-pair/json": "runstate#emptied-turn: SaveResumedTurn with no resolved items withdraws every " +
		"output folded this turn, so the executed pair is lost instead of settling (spec §5.1.7)",
}

// strictRunState reports known runstate bugs as failures.
var strictRunState = false

// runScenarioClause runs a scenario clause, reporting a known runstate bug
// as a skip while it reproduces.
func runScenarioClause(c *C, name string, run func(*C)) {
	bug, known := knownRunStateBugs[name]
	if !known || strictRunState {
		run(c)
		return
	}
	if failed, msg := captured(c, run); failed {
		c.Skipf("known runstate bug, not an adapter defect: %s. Failure: %s", bug, msg)
	}
}
