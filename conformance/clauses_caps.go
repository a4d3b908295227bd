package conformance

import (
	"context"
	"errors"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func init() {
	register(
		clause{"capabilities/declared-implemented", GroupBase, 0, clauseDeclaredImplemented},
		clause{"capabilities/implemented-declared", GroupBase, 0, clauseImplementedDeclared},
		clause{"replace/atomic", groupFor(session.CapReplace), session.CapReplace, clauseReplace},
		clause{"run-context/accepts", groupFor(session.CapRunContext), session.CapRunContext, clauseRunContext},
		clause{"ttl/expires-together", groupFor(session.CapTTL), session.CapTTL, clauseTTL},
		clause{"ttl/refresh-on-write", groupFor(session.CapTTL), session.CapTTL, clauseTTLRefresh},
	)
}

func clauseDeclaredImplemented(c *C) {
	probed := session.Probe(c.Fresh("caps"))
	for _, cap := range c.Harness().Declared().List() {
		require.True(c, probed.Has(cap), "capability %s is declared but not implemented (probed: %s)", cap, probed)
	}
}

func clauseImplementedDeclared(c *C) {
	probed := session.Probe(c.Fresh("caps"))
	for _, cap := range probed.List() {
		require.True(c, c.Harness().Declared().Has(cap), "capability %s is implemented but not declared (declared: %s)", cap, c.Harness().Declared())
	}
}

func clauseReplace(c *C) {
	s := c.Fresh("replace")
	p := c.OpenPeer(s.SessionID())
	r := s.(session.Replacer)
	add(c, s, Numbered("old", 5))
	require.NoError(c, r.ReplaceItems(c.Context(), Numbered("new", 2)))
	requireItems(c, Numbered("new", 2), all(c, s))
	requireItems(c, Numbered("new", 2), all(c, p), "the peer sees the replacement")
	add(c, p, Numbered("after", 1))
	requireItems(c, append(Numbered("new", 2), Numbered("after", 1)...), all(c, s), "appends after a replace follow it")
	got, err := session.Latest(c.Context(), s, 2)
	require.NoError(c, err)
	requireItems(c, append(Numbered("new", 2)[1:], Numbered("after", 1)...), got)
	require.NoError(c, r.ReplaceItems(c.Context(), nil))
	require.Empty(c, all(c, s), "replacing with nothing empties the session")
	require.NoError(c, session.Replace(c.Context(), s, Numbered("again", 3)))
	requireItems(c, Numbered("again", 3), all(c, p))
}

func clauseRunContext(c *C) {
	s := c.Fresh("runctx")
	a, ok := s.(session.RunContextAware)
	require.True(c, ok)
	require.True(c, a.AcceptsRunContext())
	ctx := session.WithRunContext(c.Context(), "run-context")
	require.Same(c, ctx, session.ContextFor(ctx, s), "an aware session gets the run context unchanged")
	require.NoError(c, session.Append(ctx, s, Numbered("rc", 1)))
	got, err := session.All(ctx, s)
	require.NoError(c, err)
	requireItems(c, Numbered("rc", 1), got)
}

func openTTL(c *C, ttl time.Duration) (session.Session, TTLHarness) {
	c.Helper()
	th, ok := c.Harness().(TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	id := c.ID("ttl")
	c.track(id)
	s, err := th.OpenTTL(c.Context(), id, ttl)
	if errors.Is(err, session.ErrUnsupported) {
		c.Skipf("the harness cannot open sessions with a TTL: %v", err)
	}
	require.NoError(c, err)
	return s, th
}

func clauseTTL(c *C) {
	th, ok := c.Harness().(TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	ttl := 2 * th.MinTTL()
	s, th := openTTL(c, ttl)
	e := s.(session.Expirer)
	require.Equal(c, ttl, e.TTL())
	add(c, s, Numbered("t", 3))
	add(c, s, Numbered("u", 2))
	d, ok, err := e.ExpiresIn(c.Context())
	require.NoError(c, err)
	require.True(c, ok, "a written session with a TTL reports its expiry")
	require.True(c, d > 0 && d <= ttl, "expires in %v, want (0, %v]", d, ttl)
	th.Advance(ttl + th.MinTTL())
	require.Empty(c, all(c, s), "the whole history expires together")
	got, err := session.Latest(c.Context(), s, 2)
	require.NoError(c, err)
	require.Empty(c, got)
	_, ok, err = s.PopItem(c.Context())
	require.NoError(c, err)
	require.False(c, ok)
	add(c, s, Numbered("v", 1))
	requireItems(c, Numbered("v", 1), all(c, s), "an expired session starts afresh, with no old item")
}

func clauseTTLRefresh(c *C) {
	th, ok := c.Harness().(TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	ttl := 4 * th.MinTTL()
	s, th := openTTL(c, ttl)
	add(c, s, Numbered("a", 2))
	th.Advance(ttl / 2)
	add(c, s, Numbered("b", 1))
	th.Advance(ttl/2 + th.MinTTL())
	requireItems(c, append(Numbered("a", 2), Numbered("b", 1)...), all(c, s),
		"a write refreshes the expiry of the whole session, older batches included")
	require.NoError(c, s.(session.Expirer).Touch(context.WithoutCancel(c.Context())))
	th.Advance(ttl / 2)
	require.Len(c, all(c, s), 3, "touch refreshes the expiry")
	th.Advance(ttl)
	require.Empty(c, all(c, s))
}
