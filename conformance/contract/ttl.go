package contract

import (
	"context"
	"errors"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func openTTL(c *suite.C, ttl time.Duration) (session.Session, suite.TTLHarness) {
	c.Helper()
	th, ok := c.Harness().(suite.TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	id := c.ID("ttl")
	s, err := th.OpenTTL(c.Context(), id, ttl)
	if errors.Is(err, session.ErrUnsupported) {
		c.Skipf("the harness cannot open sessions with a TTL: %v", err)
	}
	require.NoError(c, err)
	return s, th
}

func clauseTTL(c *suite.C) {
	th, ok := c.Harness().(suite.TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	ttl := 2 * th.MinTTL()
	s, th := openTTL(c, ttl)
	e := s.(session.Expirer)
	require.Equal(c, ttl, e.TTL())
	add(c, s, numbered("t", 3))
	add(c, s, numbered("u", 2))
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
	add(c, s, numbered("v", 1))
	requireItems(c, numbered("v", 1), all(c, s), "an expired session starts afresh, with no old item")
}

func clauseTTLRefresh(c *suite.C) {
	th, ok := c.Harness().(suite.TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	ttl := 4 * th.MinTTL()
	s, th := openTTL(c, ttl)
	add(c, s, numbered("a", 2))
	th.Advance(ttl / 2)
	add(c, s, numbered("b", 1))
	th.Advance(ttl/2 + th.MinTTL())
	requireItems(c, append(numbered("a", 2), numbered("b", 1)...), all(c, s),
		"a write refreshes the expiry of the whole session, older batches included")
	require.NoError(c, s.(session.Expirer).Touch(context.WithoutCancel(c.Context())))
	th.Advance(ttl / 2)
	require.Len(c, all(c, s), 3, "touch refreshes the expiry")
	th.Advance(ttl)
	require.Empty(c, all(c, s))
}
