package conformance

import (
	"fmt"
	"strings"
)

// capture is a reporter that records a failure instead of ending the
// clause, so one clause can run many cells (the fault matrix).
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
