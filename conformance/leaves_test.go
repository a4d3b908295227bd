package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// memorySnapshot is every session of a memory store: its id, every valid
// item's bytes, and how many corrupt records a read of it reports.
func memorySnapshot(t *testing.T, h *brokenHarness) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids, err := h.store.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	out := map[string]string{}
	for _, id := range ids {
		s, err := h.store.Session(id)
		require.NoError(t, err)
		before := len(h.corrupt.Reports(id))
		items, err := s.Items(ctx)
		require.NoError(t, err)
		out[id] = fmt.Sprintf("%q corrupt=%d", strings.Join(texts(items), "\n"), len(h.corrupt.Reports(id))-before)
	}
	return out
}

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// TestCheckLeavesTheStoreAsItWas runs the whole suite on a memory store
// holding users' sessions (one with a corrupt record) and compares every
// session before and after; the same test against SQLite and Redis is in
// cmd/sessionctl.
func TestCheckLeavesTheStoreAsItWas(t *testing.T) {
	var (
		mu     sync.Mutex
		probes = map[string]bool{}
	)
	h := newBroken(t, "memory with users' sessions", latestReplace|session.Caps(session.CapTTL, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce)|checkpointCaps, func(s session.Session) session.Session {
		mu.Lock()
		probes[s.SessionID()] = true
		mu.Unlock()
		return s
	})
	ctx := context.Background()
	for i, id := range []string{"user-a", "user:b {tag}", "agentsessions-check", conformance.ProbePrefix + "not-a-probe"} {
		s, err := h.store.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, conformance.Numbered(id, i+1)))
	}
	require.NoError(t, h.store.(driver.RawAppender).AppendRaw(ctx, "user-a", []byte("not json")))
	before := memorySnapshot(t, h)
	require.Len(t, before, 4)

	rep := conformance.Check(ctx, h, conformance.Options{})
	require.True(t, rep.OK(), rep.Summary())
	require.Equal(t, conformance.LevelFull, rep.Level, rep.Summary())
	require.Equal(t, before, memorySnapshot(t, h), "every session as it was, and no other")
	// Clear keeps checkpoints: the check deletes those it saved.
	require.NotEmpty(t, probes)
	for id := range probes {
		s, err := h.store.Session(id)
		require.NoError(t, err)
		names, err := s.(session.CheckpointStore).ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Empty(t, names, "probe session %q keeps checkpoints", id)
	}
}

// An interrupted check clears what it wrote too.
func TestInterruptedCheckLeavesNothing(t *testing.T) {
	h := newBroken(t, "interrupted", latestReplace, wrapStd)
	before := memorySnapshot(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	h.raw = func(ctx2 context.Context, id string, b []byte) error {
		// Interrupt the check in the middle of the corrupt-record clause.
		if n++; n == 2 {
			cancel()
		}
		return h.store.(driver.RawAppender).AppendRaw(ctx2, id, b)
	}
	rep := conformance.Check(ctx, h, conformance.Options{NativeOnly: true})
	require.NotEqual(t, conformance.LevelFull, rep.Level)
	require.Zero(t, rep.Failed, "an interrupted clause is no failure of the store: %s", rep.Summary())
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	require.Regexp(t, `SKIP  base        corrupt/isolated  \(interrupted: context canceled\)`, b.String())
	require.Regexp(t, `(?m)^  SKIP  \d+ clauses from cancel/before-call on \(not run: context canceled\)$`, b.String(), "one line for what was left")
	require.Equal(t, before, memorySnapshot(t, h), "the interrupted clause cleared its sessions")
}
