package contract

import (
	"fmt"
	"slices"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// addOnce calls the session's AddItemsOnce directly (session.AppendOnce
// checks its arguments before the store sees them).
func addOnce(c *suite.C, s session.Session, opID string, items []session.Item) (bool, error) {
	c.Helper()
	o, ok := s.(session.OnceAppender)
	require.True(c, ok, "declared append-once but AddItemsOnce is missing")
	return o.AddItemsOnce(c.Context(), opID, items)
}

// once appends items under opID and requires appended to be want.
func once(c *suite.C, s session.Session, opID string, items []session.Item, want bool, msgAndArgs ...any) {
	c.Helper()
	appended, err := addOnce(c, s, opID, items)
	require.NoError(c, err, msgAndArgs...)
	require.Equal(c, want, appended, msgAndArgs...)
}

// clauseAppendOnceSemantics checks that an operation id lands its batch
// once, whatever happens to the history after it, that ids are per
// session, and that a refused call records nothing.
func clauseAppendOnceSemantics(c *suite.C) {
	s := c.Fresh("once")
	p := c.OpenPeer(s.SessionID())
	a, b := numbered("a", 2), numbered("b", 1)
	once(c, s, "op-1", a, true, "a new operation id appends")
	once(c, p, "op-1", a, false, "the same id again, from the peer")
	once(c, s, "op-1", b, false, "the same id with another batch")
	requireItems(c, a, all(c, p), "the batch is there once")
	once(c, p, "op-2", b, true, "another id appends")
	requireItems(c, slices.Concat(a, b), all(c, s))
	got, err := session.AppendOnce(c.Context(), s, "op-2", b)
	require.NoError(c, err)
	require.False(c, got, "session.AppendOnce with a used id")

	for _, id := range []string{"op-1 ", "Op-1", "op-1\u00e9", `op "1"/'\`} {
		once(c, s, id, numbered(id, 1), true, "the id %q is not op-1", id)
		once(c, p, id, numbered(id, 1), false, "the id %q again", id)
	}
	require.NoError(c, session.Replace(c.Context(), s, b))

	_, err = addOnce(c, s, "", a)
	require.ErrorIs(c, err, session.ErrInvalidOperationID, "an empty operation id")
	_, err = addOnce(c, s, "op-bad", []session.Item{b[0], {}})
	require.ErrorIs(c, err, session.ErrInvalidItem, "a batch with an invalid item")
	requireItems(c, b, all(c, s), "a refused call appends nothing")
	once(c, p, "op-bad", a, true, "a refused call records no id")
	requireItems(c, slices.Concat(b, a), all(c, s))

	once(c, s, "op-empty", nil, true, "an empty batch records its id")
	once(c, s, "op-empty", b, false, "the id of an empty batch is used")
	requireItems(c, slices.Concat(b, a), all(c, s))

	pop(c, s, a[1])
	once(c, s, "op-bad", a, false, "the id survives a pop of its batch")
	require.NoError(c, s.Clear(c.Context()))
	for _, id := range []string{"op-1", "op-2", "op-bad", "op-empty"} {
		once(c, p, id, a, false, "the id %q survives a clear", id)
	}
	require.Empty(c, all(c, s))
	require.NoError(c, session.Replace(c.Context(), s, b))
	once(c, s, "op-1", a, false, "the id survives a replace")
	requireItems(c, b, all(c, s))

	other := c.Fresh("once-other")
	once(c, other, "op-1", a, true, "operation ids are per session")
	requireItems(c, a, all(c, other))
	requireItems(c, b, all(c, s))
}

// Concurrent shape: this many goroutines on two handles race to append the
// same operation, for each of this many operations.
const (
	onceRacers = 8
	onceOps    = 10
)

// clauseAppendOnceConcurrent races callers of one operation id: exactly
// one appends, and the batch is there once.
func clauseAppendOnceConcurrent(c *suite.C) {
	id := c.ID("once-race")
	handles := []session.Session{c.Open(id), c.OpenPeer(id)}
	var want []session.Item
	for op := 0; op < onceOps; op++ {
		batch := numbered(fmt.Sprintf("op%d", op), 3)
		opID := fmt.Sprintf("race-%d", op)
		var wg sync.WaitGroup
		results := make(chan error, onceRacers)
		appended := make(chan bool, onceRacers)
		start := make(chan struct{})
		for r := 0; r < onceRacers; r++ {
			o, ok := handles[r%len(handles)].(session.OnceAppender)
			require.True(c, ok, "declared append-once but AddItemsOnce is missing")
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := o.AddItemsOnce(c.Context(), opID, batch)
				results <- err
				appended <- ok
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		close(appended)
		for err := range results {
			require.NoError(c, err, "operation %s", opID)
		}
		n := 0
		for ok := range appended {
			if ok {
				n++
			}
		}
		require.Equal(c, 1, n, "callers of operation %s that appended", opID)
		want = append(want, batch...)
		requireItems(c, want, all(c, handles[1]), "operation %s is in the history once", opID)
	}
}
