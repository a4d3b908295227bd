package contract

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// hostileIDs returns ids built to escape a naive key, path or query layout,
// each unique to this clause run and each distinct from the others. Every
// one starts with base, so that it lies in the probe namespace: the
// hostile part is the tail.
func hostileIDs(base string) []string {
	return []string{
		base,
		base + ":",
		base + ":items",
		base + "*",
		base + "}",
		base + "{tag}",
		base + "}:{x",
		base + "%",
		base + "%2A",
		base + "'",
		base + "' OR '1'='1",
		base + `"`,
		base + "$where:",
		base + "\x00",
		base + "\x00x",
		base + "/../x",
		base + "\\",
		base + strings.Repeat("L", 4096),
		base + "-ünïcødé-☃-😀",
		base + " ",
		base + "\n",
		base + "**",
		base + "[0]",
		base + ".$",
	}
}

func clauseHostileIDs(c *suite.C) {
	ids := hostileIDs(c.ID("h"))
	seen := map[string]bool{}
	for _, id := range ids {
		require.False(c, seen[id], "test ids must be distinct")
		seen[id] = true
	}
	for i, id := range ids {
		s := c.Open(id)
		require.Equal(c, id, s.SessionID())
		add(c, s, numbered(fmt.Sprintf("h%d", i), 2))
	}
	for i, id := range ids {
		requireItems(c, numbered(fmt.Sprintf("h%d", i), 2), all(c, c.Open(id)), "session %q holds only its own items", id)
	}
	// Mutations through hostile ids stay confined too.
	for i, id := range ids {
		if i%2 == 1 {
			require.NoError(c, c.Open(id).Clear(c.Context()))
		} else {
			_, ok, err := c.Open(id).PopItem(c.Context())
			require.NoError(c, err)
			require.True(c, ok)
		}
	}
	for i, id := range ids {
		want := numbered(fmt.Sprintf("h%d", i), 1)
		if i%2 == 1 {
			want = nil
		}
		requireItems(c, want, all(c, c.Open(id)), "session %q after mutations of its neighbours", id)
	}
}

func clauseEmptyID(c *suite.C) {
	s, err := c.Harness().Open(c.Context(), "")
	if err != nil {
		require.True(c, errors.Is(err, session.ErrInvalidSessionID), "open with an empty id: want ErrInvalidSessionID, got %v", err)
		return
	}
	// A harness whose Open cannot fail must still refuse to use the id.
	err = s.AddItems(c.Context(), numbered("e", 1))
	require.True(c, errors.Is(err, session.ErrInvalidSessionID), "append with an empty id: want ErrInvalidSessionID, got %v", err)
}
