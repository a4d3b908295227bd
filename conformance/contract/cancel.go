package contract

import (
	"context"
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func clauseCancelled(c *suite.C) {
	s := c.Fresh("cancel")
	add(c, s, numbered("keep", 2))
	ctx, cancel := context.WithCancel(c.Context())
	cancel()
	check := func(op string, err error) {
		c.Helper()
		require.Error(c, err, "%s with a cancelled context must fail", op)
		require.True(c, errors.Is(err, context.Canceled), "%s: want context.Canceled, got %v", op, err)
	}
	check("AddItems", s.AddItems(ctx, numbered("lost", 3)))
	_, err := s.Items(ctx)
	check("Items", err)
	_, _, err = s.PopItem(ctx)
	check("PopItem", err)
	check("Clear", s.Clear(ctx))
	_, err = session.Latest(ctx, s, 1)
	check("Latest", err)
	if r, ok := s.(session.Replacer); ok {
		check("ReplaceItems", r.ReplaceItems(ctx, numbered("lost", 1)))
	}
	requireItems(c, numbered("keep", 2), all(c, s), "cancelled calls wrote nothing")
}
