package conformance_test

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
)

var checkpointCaps = session.Caps(session.CapCheckpoints, session.CapCheckpointCommit)

// committer returns the checkpoint methods of a memory session.
func committer(s session.Session) session.CheckpointCommitter { return s.(session.CheckpointCommitter) }

// ckptPart is the checkpoint methods of cs, to embed beside a session.
type ckptPart struct{ cs session.CheckpointCommitter }

func (w ckptPart) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	return w.cs.LoadCheckpoint(ctx, name)
}
func (w ckptPart) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	return w.cs.SaveCheckpoint(ctx, name, doc, version)
}
func (w ckptPart) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	return w.cs.DeleteCheckpoint(ctx, name, version)
}
func (w ckptPart) ListCheckpoints(ctx context.Context) ([]string, error) {
	return w.cs.ListCheckpoints(ctx)
}
func (w ckptPart) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	return w.cs.AppendWithCheckpoint(ctx, items, name, doc, version)
}

// stdCkpt exposes the standard capabilities and the checkpoints.
type stdCkpt struct {
	std
	ckptPart
}

// refCkpt is the reference session (awareTTL) with checkpoints.
type refCkpt struct {
	awareTTL
	ckptPart
}

// refFull is refCkpt with a VersionedReplacer, a Follower and a
// OnceAppender: every capability graded.
type refFull struct {
	refCkpt
	verPart
	folPart
	oncePart
}

// verPart is the reference adapter's VersionedReplacer.
type verPart struct{ v session.VersionedReplacer }

func (p verPart) HistoryVersion(ctx context.Context) (string, error) { return p.v.HistoryVersion(ctx) }
func (p verPart) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	return p.v.ReplaceItemsIf(ctx, version, items)
}

// replacesAnyVersion replaces whatever the version: a rewrite beside writers
// loses their appends.
type replacesAnyVersion struct {
	std
	verPart
}

func (p replacesAnyVersion) ReplaceItemsIf(ctx context.Context, _ string, items []session.Item) error {
	return p.v.ReplaceItems(ctx, items)
}

func wrapStdCkpt(s session.Session) session.Session {
	return stdCkpt{std{plain{s}}, ckptPart{committer(s)}}
}

var stdCkptCaps = latestReplace | checkpointCaps

// ignoresVersion saves and deletes whatever the version: last writer wins.
type ignoresVersion struct{ stdCkpt }

func (b ignoresVersion) SaveCheckpoint(ctx context.Context, name string, doc []byte, _ int64) (int64, error) {
	return b.cs.SaveCheckpoint(ctx, name, doc, session.AnyVersion)
}
func (b ignoresVersion) DeleteCheckpoint(ctx context.Context, name string, _ int64) error {
	return b.cs.DeleteCheckpoint(ctx, name, session.AnyVersion)
}

// handleCache checks versions against what this handle loaded and saved,
// not against the store: two handles each believe they hold the latest.
// Its load pauses before it returns, so that the other handle's saves
// land between a load and its save under any scheduling (without the
// pause, 1 run in 100 of the self-test under CPU contention had none, and
// the flaw went unseen).
type handleCache struct {
	stdCkpt
	mu   *sync.Mutex
	seen map[string]int64
}

func (b handleCache) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	doc, v, err := b.cs.LoadCheckpoint(ctx, name)
	if err == nil {
		b.mu.Lock()
		b.seen[name] = v
		b.mu.Unlock()
		time.Sleep(100 * time.Microsecond)
	}
	return doc, v, err
}
func (b handleCache) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if version != session.AnyVersion && version != b.seen[name] {
		return 0, fmt.Errorf("%w: cached", session.ErrCheckpointConflict)
	}
	v, err := b.cs.SaveCheckpoint(ctx, name, doc, session.AnyVersion)
	if err == nil {
		b.seen[name] = v
	}
	return v, err
}

// appendThenSave commits with an append and then a save.
type appendThenSave struct{ stdCkpt }

func (b appendThenSave) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	if err := b.AddItems(ctx, items); err != nil {
		return 0, err
	}
	runtime.Gosched()
	time.Sleep(50 * time.Microsecond) // a round trip between the two calls
	return b.cs.SaveCheckpoint(ctx, name, doc, version)
}

// saveThenAppend commits with a save and then an append.
type saveThenAppend struct{ stdCkpt }

func (b saveThenAppend) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	v, err := b.cs.SaveCheckpoint(ctx, name, doc, version)
	if err != nil {
		return 0, err
	}
	runtime.Gosched()
	time.Sleep(50 * time.Microsecond)
	return v, b.AddItems(ctx, items)
}

// clearDrops deletes the checkpoints on Clear.
type clearDrops struct{ stdCkpt }

func (b clearDrops) Clear(ctx context.Context) error {
	names, err := b.cs.ListCheckpoints(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := b.cs.DeleteCheckpoint(ctx, n, session.AnyVersion); err != nil {
			return err
		}
	}
	return b.stdCkpt.Clear(ctx)
}

// globDelete deletes every checkpoint a name matches as a glob pattern.
type globDelete struct{ stdCkpt }

func (b globDelete) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	if err := b.cs.DeleteCheckpoint(ctx, name, version); err != nil {
		return err
	}
	names, err := b.cs.ListCheckpoints(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if ok, _ := path.Match(name, n); ok {
			_ = b.cs.DeleteCheckpoint(ctx, n, session.AnyVersion)
		}
	}
	return nil
}

// unsortedList lists the names newest-sorted-last reversed.
type unsortedList struct{ stdCkpt }

func (b unsortedList) ListCheckpoints(ctx context.Context) ([]string, error) {
	names, err := b.cs.ListCheckpoints(ctx)
	slices.Reverse(names)
	return names, err
}

// TestTheSuiteCatchesBrokenCheckpoints runs the checkpoint clauses on
// checkpoint stores with one defect each: the named clauses must fail and
// the contract must not grade FULL.
func TestTheSuiteCatchesBrokenCheckpoints(t *testing.T) {
	wrapWith := func(f func(stdCkpt) session.Session) func(session.Session) session.Session {
		return func(s session.Session) session.Session { return f(wrapStdCkpt(s).(stdCkpt)) }
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T) *brokenHarness
		mustFail []string
	}{
		{"saves ignore the version", func(t *testing.T) *brokenHarness {
			return newBroken(t, "ignores-version", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session { return ignoresVersion{w} }))
		}, []string{"checkpoints/stale-version-conflict", "checkpoints/concurrent-saves", "checkpoints/versioned-crud"}},
		{"versions checked per handle", func(t *testing.T) *brokenHarness {
			return newBroken(t, "handle-cache", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session {
				return handleCache{w, &sync.Mutex{}, map[string]int64{}}
			}))
		}, []string{"checkpoints/stale-version-conflict", "checkpoints/concurrent-saves"}},
		{"commit appends, then saves", func(t *testing.T) *brokenHarness {
			return newBroken(t, "append-then-save", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session { return appendThenSave{w} }))
		}, []string{"checkpoint-commit/atomic", "checkpoint-commit/observed-atomically"}},
		{"commit saves, then appends", func(t *testing.T) *brokenHarness {
			return newBroken(t, "save-then-append", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session { return saveThenAppend{w} }))
		}, []string{"checkpoint-commit/atomic", "checkpoint-commit/observed-atomically"}},
		{"clear drops the checkpoints", func(t *testing.T) *brokenHarness {
			return newBroken(t, "clear-drops", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session { return clearDrops{w} }))
		}, []string{"checkpoints/isolated"}},
		{"a deleted name is a pattern", func(t *testing.T) *brokenHarness {
			return newBroken(t, "glob-delete", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session { return globDelete{w} }))
		}, []string{"checkpoints/isolated"}},
		{"list unsorted", func(t *testing.T) *brokenHarness {
			return newBroken(t, "unsorted", stdCkptCaps, wrapWith(func(w stdCkpt) session.Session { return unsortedList{w} }))
		}, []string{"checkpoints/versioned-crud", "checkpoints/isolated"}},
		{"checkpoints shared between ids", func(t *testing.T) *brokenHarness {
			var h *brokenHarness
			h = newBroken(t, "shared-checkpoints", stdCkptCaps, func(s session.Session) session.Session {
				// Checkpoints of an id with a '*' live under its prefix.
				w := wrapStdCkpt(s).(stdCkpt)
				id := s.SessionID()
				for i := len(id) - 1; i > 0; i-- {
					if id[i] == '*' {
						other, _ := h.store.Session(id[:i])
						w.ckptPart.cs = committer(other)
						break
					}
				}
				return w
			})
			return h
		}, []string{"checkpoints/isolated"}},
		{"checkpoints never expire", func(t *testing.T) *brokenHarness {
			h := newBroken(t, "ckpt-never-expire", stdCkptCaps|session.Caps(session.CapTTL, session.CapRunContext),
				func(s session.Session) session.Session {
					return refCkpt{awareTTL{aware{std{plain{s}}}, nil}, ckptPart{committer(s)}}
				})
			h.wrapTTL = func(s session.Session, _ time.Duration) session.Session {
				base, _ := h.store.Session(s.SessionID()) // checkpoints kept in a store without a TTL
				return refCkpt{awareTTL{aware{std{plain{s}}}, s.(session.Expirer)}, ckptPart{committer(base)}}
			}
			return h
		}, []string{"checkpoints/ttl"}},
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
			require.Equal(t, conformance.LevelBasePartial, contract.Level, rep.Summary())
			t.Logf("%s: contract %s %d/%d/%d (%s); failed %v", h.Name(), contract.Level, contract.Passed, contract.Failed, contract.Skipped, contract.Reason, failed)
		})
	}
}

// checkpointClauses selects the checkpoint clauses.
var checkpointClauses = regexp.MustCompile(`^(checkpoints|checkpoint-commit)/`)

// A store with checkpoints and no TTL grades FULL: checkpoints/ttl is
// skipped and does not count. With TTL declared it counts.
func TestCheckpointTTLClauseNeedsBothCapabilities(t *testing.T) {
	h := newBroken(t, "checkpoints without ttl", stdCkptCaps, wrapStdCkpt)
	rep := conformance.Check(context.Background(), h, conformance.Options{NativeOnly: true})
	require.True(t, rep.OK(), rep.Summary())
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
	found := false
	for _, c := range rep.Clauses {
		if checkpointClauses.MatchString(c.Name) && c.Part == conformance.PartContract {
			if c.Name == "checkpoints/ttl" {
				found = true
				require.Equal(t, conformance.StatusSkip, c.Status)
				require.Contains(t, c.Message, "capability ttl not declared")
			} else {
				require.Equal(t, conformance.StatusPass, c.Status, c.Name)
			}
		}
	}
	require.True(t, found)

	// TTL declared, but the harness cannot open TTL sessions: the clause
	// skips and the checkpoints are not graded FULL.
	noTTL := newBroken(t, "ttl without a ttl harness", stdCkptCaps|session.Caps(session.CapTTL, session.CapRunContext),
		func(s session.Session) session.Session {
			return refCkpt{awareTTL{aware{std{plain{s}}}, nil}, ckptPart{committer(s)}}
		})
	rep = conformance.Check(context.Background(), unsupportedTTL{noTTL}, conformance.Options{NativeOnly: true, Run: contractOnly})
	require.True(t, rep.OK(), rep.Summary())
	require.NotEqual(t, conformance.LevelFull, rep.Level)
	for _, c := range rep.Clauses {
		if c.Name == "checkpoints/ttl" {
			require.Equal(t, conformance.StatusSkip, c.Status, c.Message)
		}
	}
}

// unsupportedTTL is a harness whose OpenTTL is unsupported.
type unsupportedTTL struct{ *brokenHarness }

func (u unsupportedTTL) OpenTTL(context.Context, string, time.Duration) (session.Session, error) {
	return nil, fmt.Errorf("no ttl here: %w", session.ErrUnsupported)
}

// The capabilities-hidden view shows no checkpoint method.
func TestHideCapabilitiesHidesCheckpoints(t *testing.T) {
	h := newBroken(t, "full", stdCkptCaps, wrapStdCkpt)
	s, err := h.Open(context.Background(), conformance.ProbePrefix+"hide")
	require.NoError(t, err)
	require.True(t, session.Probe(s).Has(session.CapCheckpointCommit))
	hidden := conformance.HideCapabilities(h)
	require.Zero(t, hidden.Declared())
	for _, open := range []func(context.Context, string) (session.Session, error){hidden.Open, hidden.OpenPeer} {
		hs, err := open(context.Background(), conformance.ProbePrefix+"hide")
		require.NoError(t, err)
		_, ok := hs.(session.CheckpointStore)
		require.False(t, ok, "a hidden session is no CheckpointStore")
		require.Zero(t, session.Probe(hs))
	}
}
