package contract

import (
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// runCtx is the run context the clause hands the session.
type runCtx struct{ name string }

// clauseRunContext checks a session that asks for the run context: it gets
// it on every call (the session package passes ctx unchanged), and every
// call made with it behaves as the contract says, seen from a peer handle
// called without one.
func clauseRunContext(c *suite.C) {
	s := c.Fresh("runctx")
	p := c.OpenPeer(s.SessionID())
	a, ok := s.(session.RunContextAware)
	require.True(c, ok, "run-context is declared but the session is not RunContextAware")
	require.True(c, a.AcceptsRunContext(), "run-context is declared but AcceptsRunContext reports false")
	ctx := session.WithRunContext(c.Context(), &runCtx{"conformance"})
	require.True(c, session.ContextFor(ctx, s) == ctx, "an aware session gets the run context unchanged")

	items := numbered("rc", 4)
	require.NoError(c, session.Append(ctx, s, items[:3]))
	require.NoError(c, session.Append(ctx, s, items[3:]))
	got, err := session.All(ctx, s)
	require.NoError(c, err)
	requireItems(c, items, got, "items appended with the run context read back")
	requireItems(c, items, all(c, p), "the peer, called without it, reads the same")
	got, err = session.Latest(ctx, s, 2)
	require.NoError(c, err)
	requireItems(c, items[2:], got, "latest with the run context")
	it, ok, err := session.Pop(ctx, s)
	require.NoError(c, err)
	require.True(c, ok)
	require.Equal(c, items[3].String(), it.String(), "pop with the run context")
	requireItems(c, items[:3], all(c, p))
	require.NoError(c, session.Replace(ctx, s, numbered("new", 2)))
	requireItems(c, numbered("new", 2), all(c, p), "replace with the run context")
	require.NoError(c, session.Clear(ctx, s))
	require.Empty(c, all(c, p), "clear with the run context")
	require.True(c, a.AcceptsRunContext(), "the answer does not change between calls")
}
