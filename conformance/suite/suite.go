// Package suite is the machinery the conformance parts share: the Harness a
// store under test implements, the context C a clause gets, and running a
// list of clauses, with the testing package (Run) or without it (Check).
//
// Adapter authors do not use this package: they call conformance.Run. The
// parts (conformance/contract, conformance/heldwrite) build their clauses
// on it, and conformance composes them.
//
// Every session a clause touches has an id in the probe namespace
// (ProbePrefix, then the run, the part and the clause), and every one of
// them is cleared (its checkpoints deleted too) when the clause ends,
// whether it passed, failed, or was interrupted.
package suite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// ProbePrefix starts the id of every session the suite writes, so an
// operator can recognise (and, after a crash, find) what a check wrote:
// agentsessions-check:<run>:<part>:<clause>:<suffix>.
const ProbePrefix = "agentsessions-check:"

// Harness gives the suite access to one store under test. It has the
// method set of conformance.Harness.
type Harness interface {
	Name() string
	Open(ctx context.Context, id string) (session.Session, error)
	OpenPeer(ctx context.Context, id string) (session.Session, error)
	Declared() session.Capabilities
}

// TTLHarness is conformance.TTLHarness.
type TTLHarness interface {
	OpenTTL(ctx context.Context, id string, ttl time.Duration) (session.Session, error)
	Advance(d time.Duration)
	MinTTL() time.Duration
}

// CorruptReporter is conformance.CorruptReporter.
type CorruptReporter interface {
	CorruptReports(id string) []driver.CorruptRecord
}

// Remover is conformance.Remover.
type Remover interface {
	RemoveSession(ctx context.Context, id string) error
}

// Group names a set of clauses graded together.
type Group string

// GroupBase holds the contract clauses every store must pass.
const GroupBase Group = "base"

// GroupFor returns the group of a capability's clauses.
func GroupFor(c session.Capability) Group { return Group(c.String()) }

// Clause is one named check.
type Clause struct {
	Name  string
	Group Group
	// Needs is the capability the clause checks; the clause is skipped
	// when the harness does not declare it. Zero for required clauses.
	Needs session.Capability
	// Also, when set, is a second capability the clause needs (the
	// checkpoints of a session that expires need ttl too).
	//
	// A harness that does not declare Needs and Also has nothing for the
	// clause to check (Applies): the clause is skipped, and its group is
	// graded without it.
	Also session.Capability
	// Hook, when set, says whether the harness has what the clause needs
	// from it beyond sessions (Closer for the use-after-close clause). A
	// harness without it is not graded on the clause: it is skipped as
	// not applicable.
	Hook func(Harness) bool
	Run  func(c *C)
}

// NotApplicable starts the message of a clause skipped because the
// harness lacks its Hook; grading leaves such a clause out.
const NotApplicable = "not applicable: "

// Closer is conformance.Closer.
type Closer interface {
	OpenClosed(ctx context.Context, id string) (session.Session, error)
}

// Applies reports whether the clause checks anything on a harness that
// declares d: a required clause always does, a capability's clause when
// its capabilities are declared.
func (cl Clause) Applies(d session.Capabilities) bool {
	return (cl.Needs == 0 || d.Has(cl.Needs)) && (cl.Also == 0 || d.Has(cl.Also))
}

// skipReason says why a clause that does not apply to d is skipped.
func (cl Clause) skipReason(d session.Capabilities) string {
	if cl.Needs != 0 && !d.Has(cl.Needs) {
		return fmt.Sprintf("capability %s not declared", cl.Needs)
	}
	return fmt.Sprintf("capability %s not declared (the clause checks %s with %s)", cl.Also, cl.Needs, cl.Also)
}

// Status is a clause's outcome.
type Status string

// Clause outcomes.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	StatusSkip Status = "skip"
)

// Result is one clause's outcome.
type Result struct {
	Name     string        `json:"name"`
	Group    Group         `json:"group"`
	Status   Status        `json:"status"`
	Message  string        `json:"message,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Options tunes one run of a list of clauses.
type Options struct {
	// Run, when set, runs only clauses whose name matches it.
	Run *regexp.Regexp
	// Namespace starts every session id; NewNamespace makes one.
	Namespace string
	// Timeout bounds each clause; zero means two minutes.
	Timeout time.Duration
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 2 * time.Minute
	}
	return o.Timeout
}

// NewRunID returns a random run id.
func NewRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewNamespace returns the id namespace of one part of a run:
// ProbePrefix + run + ":" + part + ":".
func NewNamespace(run, part string) string { return ProbePrefix + run + ":" + part + ":" }

// Selected returns the clauses opts.Run selects.
func Selected(cs []Clause, opts Options) []Clause {
	var out []Clause
	for _, cl := range cs {
		if opts.Run == nil || opts.Run.MatchString(cl.Name) {
			out = append(out, cl)
		}
	}
	return out
}

// Run runs the clauses opts selects as subtests of t.
func Run(t *testing.T, h Harness, cs []Clause, opts Options) []Result {
	t.Helper()
	var out []Result
	for _, cl := range Selected(cs, opts) {
		start := time.Now()
		// A subtest that go test's -run filter leaves out never runs: it
		// stays a skip, never a pass.
		res := Result{Status: StatusSkip, Message: "not run: filtered out by go test -run"}
		t.Run(cl.Name, func(t *testing.T) {
			rec := &recorder{inner: t}
			defer func() { res = rec.result() }()
			if d := h.Declared(); !cl.Applies(d) {
				rec.Skipf("%s", cl.skipReason(d))
			}
			if cl.Hook != nil && !cl.Hook(h) {
				rec.Skipf("%sthe harness lacks what the clause needs", NotApplicable)
			}
			ctx, cancel := context.WithTimeout(context.Background(), opts.timeout())
			defer cancel()
			c := newC(ctx, rec, h, opts.Namespace+cl.Name+":")
			defer c.cleanup()
			cl.Run(c)
		})
		res.Name, res.Group, res.Duration = cl.Name, cl.Group, time.Since(start)
		out = append(out, res)
	}
	return out
}

// Check runs the clauses opts selects without the testing package. Each
// clause runs in its own goroutine; a failed assertion ends the clause, as
// t.FailNow does. Once ctx is done, the remaining clauses are reported
// skipped without running.
func Check(ctx context.Context, h Harness, cs []Clause, opts Options) []Result {
	var out []Result
	for _, cl := range Selected(cs, opts) {
		start := time.Now()
		res := Result{Name: cl.Name, Group: cl.Group}
		switch {
		case ctx.Err() != nil:
			res.Status, res.Message = StatusSkip, "not run: "+context.Cause(ctx).Error()
			out = append(out, res)
			continue
		case !cl.Applies(h.Declared()):
			res.Status, res.Message = StatusSkip, cl.skipReason(h.Declared())
			out = append(out, res)
			continue
		case cl.Hook != nil && !cl.Hook(h):
			res.Status, res.Message = StatusSkip, NotApplicable+"the harness lacks what the clause needs"
			out = append(out, res)
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
			c := newC(cctx, rec, h, opts.Namespace+cl.Name+":")
			defer c.cleanup()
			cl.Run(c)
		}()
		<-done
		cancel()
		r := rec.result()
		if r.Status == StatusFail && ctx.Err() != nil && !strings.Contains(r.Message, "cleanup: ") {
			// The run was interrupted: the clause's failure says nothing
			// about the store.
			r.Status, r.Message = StatusSkip, "interrupted: "+context.Cause(ctx).Error()
		}
		res.Status, res.Message, res.Duration = r.Status, r.Message, time.Since(start)
		out = append(out, res)
	}
	return out
}

// reporter is the part of testing.TB a clause uses; *testing.T has it, and
// so do the recorder Check uses and the capture Captured uses.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
}

// C is what a clause gets: assertion plumbing (it satisfies testify's
// require.TestingT), the harness, and fresh session ids. Every id it hands
// out or opens is cleared when the clause ends.
type C struct {
	reporter
	ctx context.Context
	h   Harness
	ns  string

	mu     sync.Mutex
	opened map[string]bool // ids this clause used, cleared afterwards
	parent *C              // a Captured body's clause, which clears its ids
}

func newC(ctx context.Context, r reporter, h Harness, ns string) *C {
	return &C{reporter: r, ctx: ctx, h: h, ns: ns, opened: map[string]bool{}}
}

// Track records that the clause wrote (or may have written) session id, so
// that it is cleared when the clause ends. Open, OpenPeer, Fresh and ID
// track for the clause.
func (c *C) Track(id string) {
	if c.parent != nil {
		c.parent.Track(id)
		return
	}
	c.mu.Lock()
	c.opened[id] = true
	c.mu.Unlock()
}

// Tracked returns the ids the clause used so far.
func (c *C) Tracked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.opened))
	for id := range c.opened {
		ids = append(ids, id)
	}
	return ids
}

// cleanup clears every session the clause used (deleting its checkpoints
// first, when it is a session.CheckpointStore), with a context that
// outlives the clause's own (cancelled or timed out as it may be), and then
// removes it when the harness is a Remover. A session it cannot clear
// after three tries fails the clause: the check left data behind.
func (c *C) cleanup() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Minute)
	defer cancel()
	for _, id := range c.Tracked() {
		var err error
		for try := 0; try < 3; try++ {
			if try > 0 {
				time.Sleep(time.Duration(try) * 200 * time.Millisecond)
			}
			if err = c.clear(ctx, id); err == nil {
				break
			}
		}
		if err != nil {
			c.Errorf("cleanup: the probe session %q is left behind: %v", id, err)
		}
	}
}

func (c *C) clear(ctx context.Context, id string) error {
	s, err := c.h.Open(ctx, id)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	// Clear keeps a session's checkpoints: delete them first, whatever
	// their version.
	if cs, ok := s.(session.CheckpointStore); ok {
		names, err := cs.ListCheckpoints(ctx)
		if err != nil {
			return fmt.Errorf("list checkpoints: %w", err)
		}
		for _, name := range names {
			if err := cs.DeleteCheckpoint(ctx, name, session.AnyVersion); err != nil {
				return fmt.Errorf("delete checkpoint %q: %w", name, err)
			}
		}
	}
	if err := s.Clear(ctx); err != nil {
		return fmt.Errorf("clear: %w", err)
	}
	if r, ok := c.h.(Remover); ok {
		if err := r.RemoveSession(ctx, id); err != nil {
			return fmt.Errorf("remove: %w", err)
		}
	}
	return nil
}

// Context returns the clause's context.
func (c *C) Context() context.Context { return c.ctx }

// Harness returns the harness under test.
func (c *C) Harness() Harness { return c.h }

// ID returns a session id unique to this clause run, ending in suffix, and
// tracks it.
func (c *C) ID(suffix string) string {
	id := c.ns + suffix
	c.Track(id)
	return id
}

// Open opens session id (as given, not namespaced) or fails the clause.
func (c *C) Open(id string) session.Session {
	c.Helper()
	c.Track(id)
	s, err := c.h.Open(c.ctx, id)
	if err != nil {
		c.Fatalf("open %q: %v", id, err)
	}
	return s
}

// OpenPeer opens session id through the harness's second client or fails.
func (c *C) OpenPeer(id string) session.Session {
	c.Helper()
	c.Track(id)
	s, err := c.h.OpenPeer(c.ctx, id)
	if err != nil {
		c.Fatalf("open peer %q: %v", id, err)
	}
	return s
}

// Fresh opens a new session with a unique id.
func (c *C) Fresh(suffix string) session.Session {
	c.Helper()
	return c.Open(c.ID(suffix))
}

// Fatalf reports a failure and stops the clause.
func (c *C) Fatalf(format string, args ...any) {
	c.Helper()
	c.Errorf(format, args...)
	c.FailNow()
}

// Items parses JSON objects into items or fails the clause.
func (c *C) Items(ss ...string) []session.Item {
	c.Helper()
	items, err := session.ParseItems(ss...)
	if err != nil {
		c.Fatalf("bad test item: %v", err)
	}
	return items
}

// All reads the whole history of s or fails the clause.
func (c *C) All(s session.Session) []session.Item {
	c.Helper()
	items, err := s.Items(c.ctx)
	require.NoError(c, err)
	return items
}

// Add appends items to s or fails the clause.
func (c *C) Add(s session.Session, items []session.Item) {
	c.Helper()
	require.NoError(c, s.AddItems(c.ctx, items))
}

// RequireItems fails the clause unless got holds exactly want, byte for
// byte.
func (c *C) RequireItems(want, got []session.Item, msgAndArgs ...any) {
	c.Helper()
	require.Equal(c, Texts(want), Texts(got), msgAndArgs...)
}

// Texts returns the items' JSON texts.
func Texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// Numbered returns n items {"type":"message","role":"user","content":"<tag>-<i>"}.
func Numbered(tag string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{"type":"message","role":"user","content":%q}`, fmt.Sprintf("%s-%d", tag, i)))
	}
	return out
}

// Captured runs fn with a C whose failures are recorded instead of ending
// the clause, so one clause can run many cells (the fault matrix), and
// returns whether it failed and what it said. Panics other than a failed
// assertion count as failures. The sessions fn uses are cleared with the
// clause's.
func (c *C) Captured(fn func(*C)) (failed bool, msg string) {
	r := &capture{}
	cc := newC(c.ctx, r, c.h, c.ns)
	cc.parent = c
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

// capture is the reporter of a Captured body.
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

func (r *recorder) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{Status: StatusPass, Message: strings.Join(r.msgs, "; ")}
	switch {
	case r.failed:
		res.Status = StatusFail
	case r.skipped:
		res.Status = StatusSkip
	}
	return res
}
