package contract

import (
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// coreOnly hides every optional capability of a session, so the package's
// fallbacks run.
type coreOnly struct{ session.Session }

func (coreOnly) wrap(s session.Session) session.Session { return coreOnly{s} }

// limitTable checks the latest-N table: 0, 1, n, exactly all, more than
// stored, negative. With wrap it goes through the fallback; without it
// calls LatestItems directly.
func limitTable(c *suite.C, wrap func(session.Session) session.Session) {
	s := c.Fresh("limit")
	items := numbered("l", 7)
	add(c, s, items[:3])
	add(c, s, items[3:])
	latest := func(n int) ([]session.Item, error) {
		if wrap != nil {
			return session.Latest(c.Context(), wrap(s), n)
		}
		lr, ok := s.(session.LatestReader)
		require.True(c, ok, "declared latest but LatestItems is missing")
		return lr.LatestItems(c.Context(), n)
	}
	for _, tc := range []struct {
		n    int
		want []session.Item
	}{
		{0, nil},
		{1, items[6:]},
		{3, items[4:]},
		{4, items[3:]},
		{7, items},
		{8, items},
		{1000, items},
	} {
		got, err := latest(tc.n)
		require.NoError(c, err, "n=%d", tc.n)
		requireItems(c, tc.want, got, "latest %d is the newest %d, oldest first", tc.n, tc.n)
	}
	_, err := latest(-1)
	require.Error(c, err)
	require.True(c, errors.Is(err, session.ErrInvalidLimit), "negative limit: want ErrInvalidLimit, got %v", err)

	empty := c.Fresh("limit-empty")
	if wrap != nil {
		empty = wrap(empty)
	}
	got, err := session.Latest(c.Context(), empty, 3)
	require.NoError(c, err)
	require.Empty(c, got)
}

func clauseLimitMatches(c *suite.C) {
	s := c.Fresh("limit-match")
	for i := 0; i < 5; i++ {
		add(c, s, numbered(string(rune('a'+i)), i+1))
	}
	for n := 0; n <= 17; n++ {
		native, err := session.Latest(c.Context(), s, n)
		require.NoError(c, err)
		fallback, err := session.Latest(c.Context(), coreOnly{s}, n)
		require.NoError(c, err)
		requireItems(c, fallback, native, "n=%d", n)
	}
}
