package contract

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func clauseReplace(c *suite.C) {
	s := c.Fresh("replace")
	p := c.OpenPeer(s.SessionID())
	r := s.(session.Replacer)
	add(c, s, numbered("old", 5))
	require.NoError(c, r.ReplaceItems(c.Context(), numbered("new", 2)))
	requireItems(c, numbered("new", 2), all(c, s))
	requireItems(c, numbered("new", 2), all(c, p), "the peer sees the replacement")
	add(c, p, numbered("after", 1))
	requireItems(c, append(numbered("new", 2), numbered("after", 1)...), all(c, s), "appends after a replace follow it")
	got, err := session.Latest(c.Context(), s, 2)
	require.NoError(c, err)
	requireItems(c, append(numbered("new", 2)[1:], numbered("after", 1)...), got)
	require.NoError(c, r.ReplaceItems(c.Context(), nil))
	require.Empty(c, all(c, s), "replacing with nothing empties the session")
	require.NoError(c, session.Replace(c.Context(), s, numbered("again", 3)))
	requireItems(c, numbered("again", 3), all(c, p))
}

// Atomic-replace shape: the writer swaps two histories at least
// atomicRounds times, and goes on until the readers have read at least
// atomicReads times while it wrote.
const (
	atomicRounds = 100
	atomicReads  = 200
)

// clauseReplaceAtomic swaps the history between two non-empty versions
// while readers on the peer handle read it: every read must be one version
// or the other, whole. A replace made of a clear and an append shows the
// empty gap (or half a version) to some read.
func clauseReplaceAtomic(c *suite.C) {
	s := c.Fresh("replace-atomic")
	p := c.OpenPeer(s.SessionID())
	r := s.(session.Replacer)
	versions := [][]session.Item{numbered("a", 6), numbered("b", 4)}
	add(c, s, versions[0])
	want := func(got []session.Item, n int) bool {
		for _, v := range versions {
			if n > 0 {
				v = v[max(len(v)-n, 0):]
			}
			if slices.Equal(suite.Texts(v), suite.Texts(got)) {
				return true
			}
		}
		return false
	}

	var (
		stop  atomic.Bool
		reads atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		bad   []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) < 3 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
		stop.Store(true)
	}
	reader := func(n int) {
		defer wg.Done()
		for !stop.Load() {
			var got []session.Item
			var err error
			if n == 0 {
				got, err = p.Items(c.Context())
			} else {
				got, err = session.Latest(c.Context(), p, n)
			}
			if err != nil {
				report("read during replace: %v", err)
				return
			}
			if !want(got, n) {
				report("a concurrent read (latest %d, 0: all) saw %d items %q: neither version whole", n, len(got), suite.Texts(got))
				return
			}
			reads.Add(1)
			runtime.Gosched()
		}
	}
	wg.Add(2)
	go reader(0)
	go reader(3)
	var werr error
	for i := 1; !stop.Load() && (i <= atomicRounds || reads.Load() < atomicReads); i++ {
		if werr = r.ReplaceItems(c.Context(), versions[i%2]); werr != nil {
			break
		}
		if c.Context().Err() != nil {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	require.NoError(c, werr, "replace")
	require.Empty(c, bad, "a concurrent reader saw a replace half done")
	require.NoError(c, c.Context().Err())
	got := all(c, p)
	require.True(c, want(got, 0), "after the swaps the session holds one version whole, got %q", suite.Texts(got))
}
