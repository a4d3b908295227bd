package contract

import (
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func clauseRejectedItems(c *suite.C) {
	s := c.Fresh("reject")
	add(c, s, numbered("keep", 2))
	good := numbered("new", 2)
	for name, batch := range map[string][]session.Item{
		"zero item":        {session.Item{}},
		"zero item last":   {good[0], good[1], {}},
		"zero item middle": {good[0], {}, good[1]},
	} {
		err := s.AddItems(c.Context(), batch)
		require.Error(c, err, name)
		require.True(c, errors.Is(err, session.ErrInvalidItem), "%s: want ErrInvalidItem, got %v", name, err)
	}
	requireItems(c, numbered("keep", 2), all(c, s), "a rejected batch writes nothing")
	if r, ok := s.(session.Replacer); ok {
		err := r.ReplaceItems(c.Context(), []session.Item{good[0], {}})
		require.True(c, errors.Is(err, session.ErrInvalidItem), "replace: want ErrInvalidItem, got %v", err)
		requireItems(c, numbered("keep", 2), all(c, s), "a rejected replace changes nothing")
	}
}
