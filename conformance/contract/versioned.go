package contract

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// clauseVersionedSemantics checks that every change to a new history moves
// the version (a history that came back may bring its version back), that
// a stale version is refused with nothing written, and that a current one
// replaces.
func clauseVersionedSemantics(c *suite.C) {
	s := c.Fresh("versioned")
	p := c.OpenPeer(s.SessionID())
	version := func(s session.Session) string {
		c.Helper()
		v, err := session.Version(c.Context(), s)
		require.NoError(c, err)
		return v
	}
	seen := map[string]string{}
	moved := func(what string) string {
		c.Helper()
		v := version(s)
		for w, old := range seen {
			require.NotEqual(c, old, v, "the version after %s equals the one after %s", what, w)
		}
		require.Equal(c, v, version(p), "a peer reads the same version")
		seen[what] = v
		return v
	}
	empty := moved("nothing")
	add(c, s, numbered("a", 3))
	v1 := moved("an append")
	add(c, p, numbered("b", 2))
	v2 := moved("a peer's append")
	_, ok, err := s.PopItem(c.Context())
	require.NoError(c, err)
	require.True(c, ok)
	moved("a pop")

	for _, stale := range []string{empty, v1, v2, "", "not a version"} {
		err := session.ReplaceIf(c.Context(), s, stale, numbered("x", 1))
		require.ErrorIs(c, err, session.ErrHistoryChanged, "a stale version %q", stale)
		requireItems(c, append(numbered("a", 3), numbered("b", 2)[:1]...), all(c, s), "a refused replace writes nothing")
	}
	require.NoError(c, session.ReplaceIf(c.Context(), s, version(s), numbered("new", 2)))
	requireItems(c, numbered("new", 2), all(c, p))
	v3 := moved("a replace")
	require.NoError(c, s.Clear(c.Context()))
	require.ErrorIs(c, session.ReplaceIf(c.Context(), s, v3, numbered("x", 1)), session.ErrHistoryChanged, "a clear moves the version")
	require.Empty(c, all(c, s))
}

// Beside-writers shape: writers append this many batches while the
// replacer rewrites the history with what it read, conditionally.
const (
	versionedWriters  = 3
	versionedBatches  = 40
	versionedAttempts = 30
	// versionedTries bounds the writers on a store whose reads are slow
	// beside them: the replacer's reads, tried this many times, found the
	// history changed under them on all but a few.
	versionedTries = 5 * versionedAttempts
)

// clauseVersionedBesideWriters is an operator's rewrite beside live
// writers: the replacer reads (version, history, version) and writes back
// what it read with ReplaceIf while peers append. An acknowledged append
// that a successful replace wiped out is lost.
func clauseVersionedBesideWriters(c *suite.C) {
	id := c.ID("versioned-writers")
	s := c.Open(id)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var attempts atomic.Int64 // conditional replaces tried, for the writers' pace
	var tries atomic.Int64    // reads tried, conditional replace or not
	var batches atomic.Int64
	errs := make(chan error, versionedWriters+1)
	for w := 0; w < versionedWriters; w++ {
		p := c.OpenPeer(id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At least versionedBatches each, and on until the replacer
			// has tried versionedAttempts rewrites beside them (bounded by
			// its tries, and by 20 times the batches), so that a fast
			// store's writers cannot finish before it starts.
			for b := 0; b < versionedBatches || attempts.Load() < versionedAttempts && tries.Load() < versionedTries && b < 20*versionedBatches; b++ {
				if err := p.AddItems(c.Context(), numbered(fmt.Sprintf("w%d.%d", w, b), 2)); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
				batches.Add(1)
			}
		}()
	}
	replaced, refused := 0, 0
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tries.Add(1)
			v, err := session.Version(c.Context(), s)
			if err != nil {
				errs <- err
				return
			}
			items, err := s.Items(c.Context())
			if err != nil {
				errs <- err
				return
			}
			if again, err := session.Version(c.Context(), s); err != nil || again != v {
				if err != nil {
					errs <- err
					return
				}
				continue
			}
			attempts.Add(1)
			switch err := session.ReplaceIf(c.Context(), s, v, items); {
			case err == nil:
				replaced++
			case errors.Is(err, session.ErrHistoryChanged):
				refused++
			default:
				errs <- fmt.Errorf("replace: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		c.Fatalf("%v", err)
	}
	got := all(c, s)
	require.Len(c, got, int(batches.Load())*2,
		"every acknowledged append survives the rewrites (%d replaced, %d refused)", replaced, refused)
}
