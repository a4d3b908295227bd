package heldwrite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentsessions/sessions/session"
)

// errInjected is the error a faultSession returns for an injected failure.
var errInjected = errors.New("conformance: injected session fault")

// faultOp is the kind of session call a fault targets.
type faultOp string

const (
	opRead   faultOp = "read"   // Items or LatestItems
	opAppend faultOp = "append" // AddItems
)

// faultKind is what an injected fault does.
type faultKind string

const (
	// faultFailRead: the read returns errInjected.
	faultFailRead faultKind = "fail-read"
	// faultCancelRead: the context is cancelled during the read, which
	// returns context.Canceled.
	faultCancelRead faultKind = "cancel-read"
	// faultFailBeforeCommit: the append returns errInjected, nothing written.
	faultFailBeforeCommit faultKind = "fail-before-commit"
	// faultLoseAck: the append commits, then errInjected is returned.
	faultLoseAck faultKind = "commit-then-lose-ack"
	// faultCancelBeforeCommit: the context is cancelled during the append
	// before it commits; nothing written, context.Canceled returned.
	faultCancelBeforeCommit faultKind = "cancel-before-commit"
	// faultCommitThenCancel: the append commits, then the context is
	// cancelled and context.Canceled returned.
	faultCommitThenCancel faultKind = "commit-then-cancel"
	// faultPartialCommit: only the batch's first item commits, then
	// errInjected (a backend breaking batch atomicity); recovery must refuse.
	faultPartialCommit faultKind = "partial-commit"
)

// faultKindsFor lists the faults that apply to an operation; partial
// commits need a batch of two items or more.
func faultKindsFor(op faultOp, size int) []faultKind {
	if op == opRead {
		return []faultKind{faultFailRead, faultCancelRead}
	}
	ks := []faultKind{faultFailBeforeCommit, faultLoseAck, faultCancelBeforeCommit, faultCommitThenCancel}
	if size >= 2 {
		ks = append(ks, faultPartialCommit)
	}
	return ks
}

// wantErr is the error a run hit by a fault of kind k returns.
func (k faultKind) wantErr() error {
	switch k {
	case faultCancelRead, faultCancelBeforeCommit, faultCommitThenCancel:
		return context.Canceled
	}
	return errInjected
}

// fault injects kind at the n-th call (from 1) of op since arming.
type fault struct {
	op   faultOp
	n    int
	kind faultKind
}

func (f fault) String() string { return fmt.Sprintf("%s#%d:%s", f.op, f.n, f.kind) }

// opRecord is one session call a faultSession saw while armed.
type opRecord struct {
	op    faultOp
	n     int       // call number of op since arming
	size  int       // batch size of an append
	fired faultKind // the fault injected, if any
}

// faultSession wraps any session with injectable faults keyed by operation
// and call number, records every committed batch, and checks that every
// call carries the run context when it claims to accept it. Wrap returns it
// with LatestReader exactly when the wrapped session has it.
type faultSession struct {
	inner session.Session

	mu        sync.Mutex
	armed     bool
	faults    []fault
	cancel    context.CancelFunc
	counts    map[faultOp]int
	trace     []opRecord
	batches   [][]session.Item // committed appends, all time
	onAppend  func(n int) faultKind
	rcAware   bool // AcceptsRunContext answer
	rcMissing int  // calls whose context lacked the run context (rcAware only)
	calls     int  // every call, all time
}

// faultLatest is a faultSession over a LatestReader.
type faultLatest struct{ *faultSession }

// wrapFaults wraps inner; the result has LatestReader iff inner has it and
// keepLatest is set.
func wrapFaults(inner session.Session, keepLatest bool) (session.Session, *faultSession) {
	f := &faultSession{inner: inner, counts: map[faultOp]int{}}
	if _, ok := inner.(session.LatestReader); ok && keepLatest {
		return faultLatest{f}, f
	}
	return f, f
}

// arm starts counting calls from zero and injects faults; cancel is the
// context cancel a cancelling fault calls.
func (f *faultSession) arm(cancel context.CancelFunc, faults ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.faults, f.cancel = true, slices.Clone(faults), cancel
	f.counts = map[faultOp]int{}
	f.trace = nil
}

// disarm stops injecting and tracing.
func (f *faultSession) disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.faults, f.cancel = false, nil, nil
}

// traced returns the calls seen while armed.
func (f *faultSession) traced() []opRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.trace)
}

// fired returns the faults injected while armed.
func (f *faultSession) fired() []fault {
	var out []fault
	for _, r := range f.traced() {
		if r.fired != "" {
			out = append(out, fault{r.op, r.n, r.fired})
		}
	}
	return out
}

// committed returns every batch that reached the inner session.
func (f *faultSession) committed() [][]session.Item {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// enter counts a call and returns the fault to inject (or "").
func (f *faultSession) enter(ctx context.Context, op faultOp, size int) (faultKind, context.CancelFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.rcAware {
		if _, ok := session.RunContext(ctx); !ok {
			f.rcMissing++
		}
	}
	if !f.armed {
		return "", nil
	}
	f.counts[op]++
	rec := opRecord{op: op, n: f.counts[op], size: size}
	for _, ft := range f.faults {
		if ft.op == op && ft.n == rec.n {
			rec.fired = ft.kind
		}
	}
	f.trace = append(f.trace, rec)
	return rec.fired, f.cancel
}

func (f *faultSession) recordBatch(items []session.Item) {
	f.mu.Lock()
	f.batches = append(f.batches, slices.Clone(items))
	f.mu.Unlock()
}

func cancelled(cancel context.CancelFunc, what string) error {
	if cancel != nil {
		cancel()
	}
	return fmt.Errorf("conformance: cancelled mid-%s: %w", what, context.Canceled)
}

func (f *faultSession) read(ctx context.Context, do func(context.Context) ([]session.Item, error)) ([]session.Item, error) {
	kind, cancel := f.enter(ctx, opRead, 0)
	switch kind {
	case faultFailRead:
		return nil, fmt.Errorf("read: %w", errInjected)
	case faultCancelRead:
		return nil, cancelled(cancel, "read")
	}
	return do(ctx)
}

// SessionID returns the wrapped session's id.
func (f *faultSession) SessionID() string { return f.inner.SessionID() }

// Items reads the whole history, unless a read fault is due.
func (f *faultSession) Items(ctx context.Context) ([]session.Item, error) {
	return f.read(ctx, f.inner.Items)
}

// LatestItems reads the newest n items, unless a read fault is due.
func (l faultLatest) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	return l.read(ctx, func(ctx context.Context) ([]session.Item, error) {
		return l.inner.(session.LatestReader).LatestItems(ctx, n)
	})
}

// AddItems appends items, or injects the fault due.
func (f *faultSession) AddItems(ctx context.Context, items []session.Item) error {
	kind, cancel := f.enter(ctx, opAppend, len(items))
	if kind == "" && f.onAppend != nil {
		f.mu.Lock()
		n := f.counts[opAppend]
		hook := f.onAppend
		f.mu.Unlock()
		if kind = hook(n); kind != "" {
			f.mu.Lock()
			if len(f.trace) > 0 {
				f.trace[len(f.trace)-1].fired = kind
			}
			f.mu.Unlock()
		}
	}
	commit := func(batch []session.Item) error {
		if err := f.inner.AddItems(ctx, batch); err != nil {
			return err
		}
		if len(batch) > 0 {
			f.recordBatch(batch)
		}
		return nil
	}
	switch kind {
	case faultFailBeforeCommit:
		return fmt.Errorf("append: %w", errInjected)
	case faultCancelBeforeCommit:
		return cancelled(cancel, "append")
	case faultLoseAck:
		if err := commit(items); err != nil {
			return err
		}
		return fmt.Errorf("append acknowledgement lost: %w", errInjected)
	case faultCommitThenCancel:
		if err := commit(items); err != nil {
			return err
		}
		return cancelled(cancel, "append")
	case faultPartialCommit:
		if len(items) > 1 {
			if err := commit(items[:1]); err != nil {
				return err
			}
		}
		return fmt.Errorf("append partially committed: %w", errInjected)
	}
	return commit(items)
}

// PopItem pops through the wrapped session.
func (f *faultSession) PopItem(ctx context.Context) (session.Item, bool, error) {
	f.enter(ctx, "pop", 0)
	return f.inner.PopItem(ctx)
}

// Clear clears through the wrapped session.
func (f *faultSession) Clear(ctx context.Context) error {
	f.enter(ctx, "clear", 0)
	return f.inner.Clear(ctx)
}

// AcceptsRunContext reports whether the wrapper asks for the run context.
func (f *faultSession) AcceptsRunContext() bool { return f.rcAware }

// wrapperless returns how many calls lacked the run context.
func (f *faultSession) wrapperless() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rcMissing
}

// compactionEntry is one compaction call a compactionRecorder saw.
type compactionEntry struct {
	deferred string // response id of a DeferCompaction
	ran      string // response id of a RunCompaction
	store    string // "true", "false" or "null"
	force    bool   // RunCompaction was forced
}

// compactionRecorder makes any session compaction-aware (with deferral)
// and records the bookkeeping a save does, as the Python SDK's tests'
// _CompactionRecordingSession does.
type compactionRecorder struct {
	session.Session
	mu      sync.Mutex
	entries []compactionEntry
	pending string
}

func newCompactionRecorder(s session.Session) *compactionRecorder {
	return &compactionRecorder{Session: s}
}

func storeText(b *bool) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprint(*b)
}

// LatestItems reads the newest n items through the session package.
func (r *compactionRecorder) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	return session.Latest(ctx, r.Session, n)
}

// RunCompaction records a compaction and clears a pending deferral.
func (r *compactionRecorder) RunCompaction(_ context.Context, args session.CompactionArgs) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, compactionEntry{ran: args.ResponseID, store: storeText(args.Store), force: args.Force})
	r.pending = ""
	return nil
}

// DeferCompaction records a deferral.
func (r *compactionRecorder) DeferCompaction(_ context.Context, responseID string, store *bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, compactionEntry{deferred: responseID, store: storeText(store)})
	r.pending = responseID
	return nil
}

// DeferredCompaction returns the pending deferral.
func (r *compactionRecorder) DeferredCompaction() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending, r.pending != ""
}

func (r *compactionRecorder) log() []compactionEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries)
}
