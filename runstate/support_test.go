package runstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

var ctx = context.Background()

// errBackend is the error a faulty session returns.
var errBackend = errors.New("session append failed")

// appendFault says how the next append of a fakeSession fails.
type appendFault int

const (
	noFault      appendFault = iota
	failBefore               // nothing written, error
	failAfter                // everything written, error (lost acknowledgement)
	failPartial              // the first item written, error
	failReadOnce             // the next read fails
)

// fakeSession is a memory session that records its calls, can fail its
// next append or read, and can be given extra behaviour by a test.
type fakeSession struct {
	*memory.Session
	fault   appendFault
	appends [][]session.Item
	reads   int
	onRead  func()
	rcSeen  []bool // per call: whether the run context was visible
	calls   int
}

func newFake(t testing.TB, id string) *fakeSession {
	t.Helper()
	s, err := memory.NewSession(id)
	require.NoError(t, err)
	return &fakeSession{Session: s}
}

func (f *fakeSession) see(ctx context.Context) {
	_, ok := session.RunContext(ctx)
	f.rcSeen = append(f.rcSeen, ok)
	f.calls++
}

func (f *fakeSession) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	f.see(ctx)
	f.reads++
	if f.onRead != nil {
		hook := f.onRead
		f.onRead = nil
		hook()
	}
	if f.fault == failReadOnce {
		f.fault = noFault
		return nil, errBackend
	}
	return f.Session.LatestItems(ctx, n)
}

func (f *fakeSession) Items(ctx context.Context) ([]session.Item, error) {
	f.see(ctx)
	return f.Session.Items(ctx)
}

func (f *fakeSession) AddItems(ctx context.Context, items []session.Item) error {
	f.see(ctx)
	f.appends = append(f.appends, items)
	fault := f.fault
	if fault != failReadOnce {
		f.fault = noFault
	}
	switch fault {
	case failBefore:
		return errBackend
	case failAfter:
		if err := f.Session.AddItems(ctx, items); err != nil {
			return err
		}
		return errBackend
	case failPartial:
		if err := f.Session.AddItems(ctx, items[:1]); err != nil {
			return err
		}
		return errBackend
	}
	return f.Session.AddItems(ctx, items)
}

// all returns the session's items as strings.
func (f *fakeSession) all(t testing.TB) []string {
	t.Helper()
	items, err := f.Session.Items(ctx)
	require.NoError(t, err)
	return strs(items)
}

func strs(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// types returns "type:call_id" (or the role) of each item.
func types(items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		it := session.MustItem(s)
		label := it.Type()
		if r := it.Role(); r != "" {
			label = "role=" + r
		}
		if c := it.CallID(); c != "" {
			label += ":" + c
		} else if id := it.ID(); id != "" {
			label += ":" + id
		} else if a, ok := it.StringField("approval_request_id"); ok {
			label += ":" + a
		}
		out[i] = label
	}
	return out
}

// contextAware is a fakeSession that accepts the run context.
type contextAware struct{ *fakeSession }

func (contextAware) AcceptsRunContext() bool { return true }

// conversation is a fakeSession that is ID-insensitive (Conversations-like).
type conversation struct{ *fakeSession }

func (conversation) IgnoreIDsForMatching() bool { return true }

// legacy hides every optional capability: only the core interface.
type legacy struct{ session.Session }

// compactor is a compaction-aware fakeSession that records its
// bookkeeping calls.
type compactor struct {
	*fakeSession
	log      []string
	deferred string
	failRun  error
	rc       []string // "run:<seen>" / "defer:<seen>": whether the run context reached the call
}

func (c *compactor) RunCompaction(ctx context.Context, args session.CompactionArgs) error {
	_, seen := session.RunContext(ctx)
	c.rc = append(c.rc, "run:"+map[bool]string{true: "yes", false: "no"}[seen])
	c.log = append(c.log, "ran:"+args.ResponseID+":store="+boolStr(args.Store)+":force="+map[bool]string{true: "yes", false: "no"}[args.Force])
	if c.failRun != nil {
		return c.failRun
	}
	c.deferred = ""
	return nil
}

func (c *compactor) DeferCompaction(ctx context.Context, responseID string, store *bool) error {
	_, seen := session.RunContext(ctx)
	c.rc = append(c.rc, "defer:"+map[bool]string{true: "yes", false: "no"}[seen])
	c.log = append(c.log, "deferred:"+responseID+":store="+boolStr(store))
	c.deferred = responseID
	return nil
}

func (c *compactor) DeferredCompaction() (string, bool) { return c.deferred, c.deferred != "" }

func boolStr(b *bool) string {
	if b == nil {
		return "None"
	}
	if *b {
		return "True"
	}
	return "False"
}

// untouchable fails the test on any call.
type untouchable struct {
	t  testing.TB
	id string
}

func (u untouchable) SessionID() string { return u.id }
func (u untouchable) Items(context.Context) ([]session.Item, error) {
	u.t.Errorf("unexpected Items")
	return nil, errors.New("untouchable")
}
func (u untouchable) AddItems(context.Context, []session.Item) error {
	u.t.Errorf("unexpected AddItems")
	return errors.New("untouchable")
}
func (u untouchable) PopItem(context.Context) (session.Item, bool, error) {
	u.t.Errorf("unexpected PopItem")
	return session.Item{}, false, errors.New("untouchable")
}
func (u untouchable) Clear(context.Context) error {
	u.t.Errorf("unexpected Clear")
	return errors.New("untouchable")
}

// Item builders.
func call(id string) session.Item {
	return session.MustItem(`{"type":"function_call","call_id":"` + id + `","name":"write_thing","arguments":"{}"}`)
}
func output(id string) session.Item {
	return session.MustItem(`{"type":"function_call_output","call_id":"` + id + `","output":"wrote"}`)
}
func user(text string) session.Item {
	return session.MustItem(`{"role":"user","content":"` + text + `"}`)
}
func assistant(text string) session.Item {
	return session.MustItem(`{"type":"message","role":"assistant","content":"` + text + `"}`)
}
func reasoning(id string) session.Item {
	if id == "" {
		return session.MustItem(`{"type":"reasoning","summary":[]}`)
	}
	return session.MustItem(`{"type":"reasoning","id":"` + id + `","summary":[]}`)
}
func items(its ...session.Item) []session.Item { return its }

// roundTrip writes cp to JSON and loads it back.
func roundTrip(t testing.TB, cp *runstate.Checkpoint) *runstate.Checkpoint {
	t.Helper()
	b, err := cp.MarshalJSON()
	require.NoError(t, err)
	back, err := runstate.Load(b)
	require.NoError(t, err)
	return back
}

// fresh returns a checkpoint at the given step.
func fresh(kind runstate.StepKind) *runstate.Checkpoint {
	cp := runstate.New()
	cp.SetStep(kind)
	return cp
}

func ptr[T any](v T) *T { return &v }

func hasPendingKey(t testing.TB, cp *runstate.Checkpoint) bool {
	t.Helper()
	b, err := cp.MarshalJSON()
	require.NoError(t, err)
	return strings.Contains(string(b), `"pending_session_write"`)
}

// newFakeQuiet is newFake outside a test (the fuzz interpreter's).
func newFakeQuiet(id string) *fakeSession {
	s, err := memory.NewSession(id)
	if err != nil {
		panic(err)
	}
	return &fakeSession{Session: s}
}
