package conformance_test

import (
	"context"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// fakeClock is a clock the TTL clauses move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// brokenHarness serves memory sessions through a wrapper with one defect,
// to prove the suite notices it. Its raw writes go to the memory store and
// its corrupt reports come from a Collector, so every base clause runs.
type brokenHarness struct {
	name     string
	store    adapters.Store
	corrupt  *driver.CorruptLog
	wrap     func(session.Session) session.Session
	declared session.Capabilities
	// raw, when set, replaces the raw-write hook.
	raw func(ctx context.Context, id string, b []byte) error
	// reports, when set, replaces the corrupt reports.
	reports func(id string) []driver.CorruptRecord

	clock *fakeClock
	mu    sync.Mutex
	ttl   map[time.Duration]*memory.Store
	// wrapTTL wraps TTL sessions; nil means wrap.
	wrapTTL func(session.Session, time.Duration) session.Session
}

func newBroken(t *testing.T, name string, declared session.Capabilities, wrap func(session.Session) session.Session) *brokenHarness {
	t.Helper()
	c := &driver.CorruptLog{}
	st, err := adapters.OpenWith(context.Background(), "memory://", adapters.Options{OnCorrupt: c.Handler()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return &brokenHarness{name: name, store: st, corrupt: c, wrap: wrap, declared: declared,
		clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, ttl: map[time.Duration]*memory.Store{}}
}

func (h *brokenHarness) Name() string { return h.name }

// OpenClosed returns id in a memory store of its own, closed, through the
// harness's wrapper (conformance.Closer).
func (h *brokenHarness) OpenClosed(ctx context.Context, id string) (session.Session, error) {
	st, err := adapters.OpenWith(ctx, "memory://", adapters.Options{})
	if err != nil {
		return nil, err
	}
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	return h.wrap(s), nil
}
func (h *brokenHarness) Open(_ context.Context, id string) (session.Session, error) {
	s, err := h.store.Session(id)
	if err != nil {
		return nil, err
	}
	return h.wrap(s), nil
}
func (h *brokenHarness) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return h.Open(ctx, id)
}
func (h *brokenHarness) Declared() session.Capabilities { return h.declared }

// RemoveSession removes what a clause left in the memory store, operation
// ids included (conformance.Remover).
func (h *brokenHarness) RemoveSession(ctx context.Context, id string) error {
	return h.store.(interface {
		RemoveSession(ctx context.Context, id string) error
	}).RemoveSession(ctx, id)
}
func (h *brokenHarness) AppendRaw(ctx context.Context, id string, b []byte) error {
	if h.raw != nil {
		return h.raw(ctx, id, b)
	}
	return h.store.(driver.RawAppender).AppendRaw(ctx, id, b)
}
func (h *brokenHarness) CorruptReports(id string) []driver.CorruptRecord {
	if h.reports != nil {
		return h.reports(id)
	}
	return h.corrupt.Reports(id)
}
func (h *brokenHarness) OpenTTL(_ context.Context, id string, ttl time.Duration) (session.Session, error) {
	h.mu.Lock()
	st := h.ttl[ttl]
	if st == nil {
		st = memory.New(memory.Options{TTL: ttl, Now: h.clock.Now})
		h.ttl[ttl] = st
	}
	h.mu.Unlock()
	s, err := st.Session(id)
	if err != nil {
		return nil, err
	}
	if h.wrapTTL != nil {
		return h.wrapTTL(s, ttl), nil
	}
	return h.wrap(s), nil
}
func (h *brokenHarness) Advance(d time.Duration) { h.clock.Advance(d) }
func (h *brokenHarness) MinTTL() time.Duration   { return time.Second }

// plain hides every optional method.
type plain struct{ session.Session }

// std exposes exactly the two standard capabilities.
type std struct{ plain }

func (l std) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	return l.Session.(session.LatestReader).LatestItems(ctx, n)
}
func (l std) ReplaceItems(ctx context.Context, items []session.Item) error {
	return l.Session.(session.Replacer).ReplaceItems(ctx, items)
}

func wrapStd(s session.Session) session.Session { return std{plain{s}} }

// oldestFirst answers latest-N with the oldest N, a bug peers have shipped.
type oldestFirst struct{ plain }

func (o oldestFirst) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	all, err := o.Items(ctx)
	if err != nil || n >= len(all) {
		return all, err
	}
	return all[:n], nil
}

// dropsLast loses the last item of every batch.
type dropsLast struct{ plain }

func (d dropsLast) AddItems(ctx context.Context, items []session.Item) error {
	if len(items) > 1 {
		items = items[:len(items)-1]
	}
	return d.plain.AddItems(ctx, items)
}

// ignoresCancel writes even when the context is already cancelled.
type ignoresCancel struct{ plain }

func (i ignoresCancel) AddItems(_ context.Context, items []session.Item) error {
	return i.plain.AddItems(context.Background(), items)
}

// perItem appends a batch one item at a time, so batches interleave.
type perItem struct{ plain }

func (p perItem) AddItems(ctx context.Context, items []session.Item) error {
	for _, it := range items {
		if err := p.plain.AddItems(ctx, []session.Item{it}); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// clearThenAdd replaces with a Clear and an AddItems: a reader between the
// two sees an empty session.
type clearThenAdd struct{ std }

func (c clearThenAdd) ReplaceItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := c.Clear(ctx); err != nil {
		return err
	}
	runtime.Gosched()
	time.Sleep(50 * time.Microsecond) // a network round trip between the two calls
	return c.AddItems(ctx, items)
}

// neverExpires declares a TTL but keeps everything forever.
type neverExpires struct {
	std
	ttl time.Duration
}

func (n neverExpires) TTL() time.Duration { return n.ttl }
func (n neverExpires) ExpiresIn(context.Context) (time.Duration, bool, error) {
	return n.ttl, true, nil
}
func (n neverExpires) Touch(context.Context) error { return nil }

// aware accepts the run context.
type aware struct{ std }

func (aware) AcceptsRunContext() bool { return true }

// loses drops every batch appended with a run context.
type loses struct{ aware }

func (l loses) AddItems(ctx context.Context, items []session.Item) error {
	if _, ok := session.RunContext(ctx); ok {
		return nil
	}
	return l.aware.AddItems(ctx, items)
}

// sharedNamespace maps every id with a '*' onto its prefix: a naive key
// layout.
func sharedNamespace(h **brokenHarness) func(session.Session) session.Session {
	return func(s session.Session) session.Session {
		id := s.SessionID()
		for i := len(id) - 1; i > 0; i-- {
			if id[i] == '*' {
				other, _ := (*h).store.Session(id[:i])
				return plain{other}
			}
		}
		return plain{s}
	}
}

var latestReplace = session.Caps(session.CapLatest, session.CapReplace)

// TestTheSuiteCatchesBrokenAdapters runs the suite on adapters with one
// defect each: the named clauses must fail and the grade must be the one
// given, never FULL.
func TestTheSuiteCatchesBrokenAdapters(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T) *brokenHarness
		mustFail []string
		level    conformance.Level
	}{
		{"latest returns the oldest", func(t *testing.T) *brokenHarness {
			return newBroken(t, "oldest-first", session.Caps(session.CapLatest), func(s session.Session) session.Session { return oldestFirst{plain{s}} })
		}, []string{"limit/native-table", "limit/native-matches-fallback", "core/round-trip"}, conformance.LevelNone},
		{"a batch loses its last item", func(t *testing.T) *brokenHarness {
			return newBroken(t, "drops-last", 0, func(s session.Session) session.Session { return dropsLast{plain{s}} })
		}, []string{"core/order", "core/round-trip", "concurrency/two-handles"}, conformance.LevelNone},
		{"cancellation ignored", func(t *testing.T) *brokenHarness {
			return newBroken(t, "ignores-cancel", 0, func(s session.Session) session.Session { return ignoresCancel{plain{s}} })
		}, []string{"cancel/before-call"}, conformance.LevelNone},
		{"batches interleave", func(t *testing.T) *brokenHarness {
			return newBroken(t, "per-item", 0, func(s session.Session) session.Session { return perItem{plain{s}} })
		}, []string{"concurrency/two-handles"}, conformance.LevelNone},
		{"a conditional replace ignores the version", func(t *testing.T) *brokenHarness {
			return newBroken(t, "ignores-version", latestReplace|session.Caps(session.CapVersionedReplace), func(s session.Session) session.Session {
				return replacesAnyVersion{std{plain{s}}, verPart{s.(session.VersionedReplacer)}}
			})
			// semantics catches it every time; beside-writers, a race,
			// in nearly every run (39 of 40 under -race), so it is not
			// required here.
		}, []string{"versioned-replace/semantics"}, conformance.LevelBasePartial},
		{"a follower counts items, blind to a pop then an append", func(t *testing.T) *brokenHarness {
			return newBroken(t, "counts-items", latestReplace|session.Caps(session.CapFollow), func(s session.Session) session.Session {
				return countsItems{std{plain{s}}}
			})
		}, []string{"follow/semantics"}, conformance.LevelBasePartial},
		{"operation ids forgotten on a clear", func(t *testing.T) *brokenHarness {
			ops := &onceLog{ids: map[string]bool{}}
			return newBroken(t, "forgets-on-clear", latestReplace|session.Caps(session.CapAppendOnce), func(s session.Session) session.Session {
				return forgetsOnClear{std{plain{s}}, ops}
			})
		}, []string{"append-once/semantics"}, conformance.LevelBasePartial},
		{"declared but not implemented", func(t *testing.T) *brokenHarness {
			return newBroken(t, "undeclared", session.Caps(session.CapReplace), func(s session.Session) session.Session { return plain{s} })
		}, []string{"capabilities/declared-implemented"}, conformance.LevelNone},
		{"implemented but not declared", func(t *testing.T) *brokenHarness {
			return newBroken(t, "overdeclared", session.Caps(session.CapLatest), func(s session.Session) session.Session { return s })
		}, []string{"capabilities/implemented-declared"}, conformance.LevelNone},
		{"ids leak into each other", func(t *testing.T) *brokenHarness {
			var h *brokenHarness
			h = newBroken(t, "shared-namespace", 0, sharedNamespace(&h))
			return h
		}, []string{"ids/hostile"}, conformance.LevelNone},
		{"raw write: reads stop at a corrupt record", func(t *testing.T) *brokenHarness {
			// The reader gives up at the first unreadable record and
			// returns what came before it: valid items after it vanish.
			h := newBroken(t, "stops-at-corrupt", latestReplace, wrapStd)
			var mu sync.Mutex
			cut := map[string]int{}
			h.raw = func(ctx context.Context, id string, b []byte) error {
				s, err := h.store.Session(id)
				if err != nil {
					return err
				}
				items, err := s.Items(ctx)
				if err != nil {
					return err
				}
				mu.Lock()
				if _, ok := cut[id]; !ok {
					cut[id] = len(items)
				}
				mu.Unlock()
				return h.store.(driver.RawAppender).AppendRaw(ctx, id, b)
			}
			h.wrap = func(s session.Session) session.Session {
				return stopsAtCorrupt{std{plain{s}}, func() (int, bool) {
					mu.Lock()
					defer mu.Unlock()
					n, ok := cut[s.SessionID()]
					return n, ok
				}}
			}
			return h
		}, []string{"corrupt/isolated"}, conformance.LevelNone},
		{"raw write: corrupt records skipped silently", func(t *testing.T) *brokenHarness {
			h := newBroken(t, "silent-corrupt", latestReplace, wrapStd)
			h.reports = func(string) []driver.CorruptRecord { return nil }
			return h
		}, []string{"corrupt/isolated"}, conformance.LevelNone},
		{"raw write: the store cannot write raw records", func(t *testing.T) *brokenHarness {
			h := newBroken(t, "no-raw", latestReplace, wrapStd)
			h.raw = func(context.Context, string, []byte) error { return session.ErrUnsupported }
			return h
		}, nil, conformance.LevelNone}, // skipped, not failed: still not FULL
		{"ttl declared, nothing expires", func(t *testing.T) *brokenHarness {
			h := newBroken(t, "never-expires", latestReplace|session.Caps(session.CapTTL), func(s session.Session) session.Session {
				return neverExpires{std{plain{s}}, 0}
			})
			h.wrapTTL = func(s session.Session, ttl time.Duration) session.Session {
				_ = s // the TTL store is ignored: the session keeps its items forever
				base, _ := h.store.Session(s.SessionID())
				return neverExpires{std{plain{base}}, ttl}
			}
			return h
		}, []string{"ttl/expires-together", "ttl/refresh-on-write"}, conformance.LevelBasePartial},
		{"replace is a clear then an append", func(t *testing.T) *brokenHarness {
			return newBroken(t, "clear-then-add", latestReplace, func(s session.Session) session.Session { return clearThenAdd{std{plain{s}}} })
		}, []string{"replace/atomic"}, conformance.LevelBasePartial},
		{"run context loses writes", func(t *testing.T) *brokenHarness {
			return newBroken(t, "run-context-loses", latestReplace|session.Caps(session.CapRunContext), func(s session.Session) session.Session {
				return loses{aware{std{plain{s}}}}
			})
		}, []string{"run-context/accepts"}, conformance.LevelBasePartial},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.setup(t)
			rep := conformance.Check(context.Background(), h, conformance.Options{NativeOnly: true, Run: contractOnly})
			var failed []string
			for _, c := range rep.Clauses {
				if c.Status == conformance.StatusFail {
					failed = append(failed, c.Name)
				}
			}
			for _, name := range tc.mustFail {
				require.True(t, slices.Contains(failed, name), "clause %s must fail; failed: %v", name, failed)
			}
			contract := rep.Part(conformance.PartContract)
			require.NotNil(t, contract)
			require.Equal(t, tc.level, contract.Level, rep.Summary())
			require.NotEqual(t, conformance.LevelFull, rep.Level)
			t.Logf("%s: contract %s %d/%d/%d (%s)", h.Name(), contract.Level, contract.Passed, contract.Failed, contract.Skipped, contract.Reason)
		})
	}
}

// stopsAtCorrupt reads only the items before the first corrupt record.
type stopsAtCorrupt struct {
	std
	cut func() (int, bool)
}

func (s stopsAtCorrupt) Items(ctx context.Context) ([]session.Item, error) {
	items, err := s.std.Items(ctx)
	if n, ok := s.cut(); ok && err == nil && n < len(items) {
		items = items[:n]
	}
	return items, err
}

// contractOnly selects the contract's clauses.
var contractOnly = regexp.MustCompile(`^(core|input|ids|corrupt|cancel|concurrency|capabilities|limit|replace|run-context|ttl|checkpoints|checkpoint-commit|versioned-replace|follow|append-once)/`)

// TestCheckGradesTheReferenceAdapterFull runs the whole suite, every part,
// on a sound adapter declaring every capability the contract grades.
func TestCheckGradesTheReferenceAdapterFull(t *testing.T) {
	full := func(s session.Session, e session.Expirer) session.Session {
		return refFull{refCkpt{awareTTL{aware{std{plain{s}}}, e}, ckptPart{committer(s)}},
			verPart{s.(session.VersionedReplacer)}, folPart{s.(session.Follower)}, oncePart{s.(session.OnceAppender)}}
	}
	h := newBroken(t, "reference", latestReplace|session.Caps(session.CapRunContext, session.CapTTL, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce)|checkpointCaps,
		func(s session.Session) session.Session { return full(s, nil) })
	h.wrapTTL = func(s session.Session, _ time.Duration) session.Session { return full(s, s.(session.Expirer)) }
	rep := conformance.Check(context.Background(), h, conformance.Options{})
	require.True(t, rep.OK(), rep.Summary())
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
	want := map[string]conformance.Level{
		conformance.PartContract:       conformance.LevelFull,
		conformance.PartContractHidden: conformance.LevelBase,
		conformance.PartHeldWrite:      conformance.LevelFull,
	}
	require.Len(t, rep.Parts, 3)
	for _, p := range rep.Parts {
		require.Equal(t, want[p.Name], p.Level, "%s: %s", p.Name, p.Reason)
		require.Equal(t, p.Total, p.Passed+p.Skipped, p.Name)
		t.Logf("%s %s %d/%d/%d of %d", p.Name, p.Level, p.Passed, p.Failed, p.Skipped, p.Total)
	}
	require.Zero(t, rep.Part(conformance.PartContract).Skipped, "natively, every clause runs")
	for _, c := range rep.Clauses {
		if c.Name == "run-context/accepts" && c.Part == conformance.PartContract {
			require.Equal(t, conformance.StatusPass, c.Status, "run-context/accepts runs where declared")
		}
	}
	js, err := rep.JSON()
	require.NoError(t, err)
	require.Contains(t, string(js), `"level": "FULL"`)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	require.Regexp(t, `(?m)^contract +FULL +\d+ passed, 0 failed, 0 skipped of \d+$`, b.String())
	require.Regexp(t, `(?m)^held-write +FULL +144 passed, 0 failed, 0 skipped of 144$`, b.String())
	require.Contains(t, b.String(), "\nlevel FULL\n")

	bare := newBroken(t, "bare", 0, func(s session.Session) session.Session { return plain{s} })
	rep = conformance.Check(context.Background(), bare, conformance.Options{})
	require.True(t, rep.OK(), rep.Summary())
	require.Equal(t, conformance.LevelBase, rep.Level, "no capabilities: BASE")
	hw := rep.Part(conformance.PartHeldWrite)
	require.Equal(t, conformance.LevelFull, hw.Level, "held-write without checkpoints: %s", hw.Reason)
	require.Equal(t, 48, hw.Skipped, "the stored mode needs checkpoints, and does not count without them")
}

// A skipped base clause keeps the grade at NONE: nothing unverified
// counts as passed.
func TestSkippedBaseClauseBlocksFull(t *testing.T) {
	h := newBroken(t, "no-reports", latestReplace, wrapStd)
	rep := conformance.Check(context.Background(), noRaw{h}, conformance.Options{NativeOnly: true, Run: contractOnly})
	require.True(t, rep.OK(), "nothing failed")
	require.Equal(t, conformance.LevelNone, rep.Level)
	require.Contains(t, rep.Summary(), "base clause corrupt/isolated skipped")
}

// noRaw is a harness without a raw-write hook.
type noRaw struct{ h *brokenHarness }

func (n noRaw) Name() string { return "no-raw" }
func (n noRaw) Open(ctx context.Context, id string) (session.Session, error) {
	return n.h.Open(ctx, id)
}
func (n noRaw) OpenPeer(ctx context.Context, id string) (session.Session, error) {
	return n.h.OpenPeer(ctx, id)
}
func (n noRaw) Declared() session.Capabilities { return n.h.Declared() }

// awareTTL is a sound session with every capability the contract grades.
type awareTTL struct {
	aware
	e session.Expirer
}

func (a awareTTL) TTL() time.Duration {
	if a.e == nil {
		return 0
	}
	return a.e.TTL()
}
func (a awareTTL) ExpiresIn(ctx context.Context) (time.Duration, bool, error) {
	if a.e == nil {
		return 0, false, nil
	}
	return a.e.ExpiresIn(ctx)
}
func (a awareTTL) Touch(ctx context.Context) error {
	if a.e == nil {
		return nil
	}
	return a.e.Touch(ctx)
}
