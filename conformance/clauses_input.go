package conformance

import (
	"errors"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func init() {
	register(
		clause{"input/rejected-items", GroupBase, 0, clauseRejectedItems},
		clause{"input/construction", GroupBase, 0, clauseConstruction},
	)
}

func clauseRejectedItems(c *C) {
	s := c.Fresh("reject")
	add(c, s, Numbered("keep", 2))
	good := Numbered("new", 2)
	for name, batch := range map[string][]session.Item{
		"zero item":        {session.Item{}},
		"zero item last":   {good[0], good[1], {}},
		"zero item middle": {good[0], {}, good[1]},
	} {
		err := s.AddItems(c.Context(), batch)
		require.Error(c, err, name)
		require.True(c, errors.Is(err, session.ErrInvalidItem), "%s: want ErrInvalidItem, got %v", name, err)
	}
	requireItems(c, Numbered("keep", 2), all(c, s), "a rejected batch writes nothing")
	if r, ok := s.(session.Replacer); ok {
		err := r.ReplaceItems(c.Context(), []session.Item{good[0], {}})
		require.True(c, errors.Is(err, session.ErrInvalidItem), "replace: want ErrInvalidItem, got %v", err)
		requireItems(c, Numbered("keep", 2), all(c, s), "a rejected replace changes nothing")
	}
}

func clauseConstruction(c *C) {
	for _, bad := range []string{
		``, ` `, `null`, `[]`, `[{"a":1}]`, `"str"`, `1`, `true`,
		`{`, `{"a":}`, `{"a":1}{"b":2}`, `{"a":1},`, `{'a':1}`, `{"a":NaN}`,
		"{\"a\":\"\xff\"}", strings.Repeat("[", 20000),
	} {
		_, err := session.ParseItem(bad)
		require.Error(c, err, "%q must be rejected", bad)
		require.True(c, errors.Is(err, session.ErrInvalidItem), "%q: want ErrInvalidItem, got %v", bad, err)
		_, err = session.NewItem([]byte(bad))
		require.True(c, errors.Is(err, session.ErrInvalidItem), "%q: want ErrInvalidItem, got %v", bad, err)
	}
	for _, ok := range []string{`{}`, ` {"a":1} `, "\n{\"a\":[1,{\"b\":null}]}\t"} {
		_, err := session.ParseItem(ok)
		require.NoError(c, err, "%q is a JSON object", ok)
	}
}
