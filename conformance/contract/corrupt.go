package contract

import (
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// clauseCorrupt stores records the adapter would refuse between valid ones
// and checks that they hide no valid item, make none disappear, and are
// reported.
func clauseCorrupt(c *suite.C) {
	rw, ok := c.Harness().(driver.RawAppender)
	if !ok {
		c.Skipf("the harness has no raw-write hook (driver.RawAppender) for this backend")
	}
	cr, ok := c.Harness().(suite.CorruptReporter)
	if !ok {
		c.Skipf("the harness collects no corrupt-record reports (suite.CorruptReporter)")
	}
	s := c.Fresh("corrupt")
	id := s.SessionID()
	v := numbered("v", 4)
	raw := func(b string) {
		c.Helper()
		err := rw.AppendRaw(c.Context(), id, []byte(b))
		if errors.Is(err, session.ErrUnsupported) {
			c.Skipf("the store cannot write raw records: %v", err)
		}
		require.NoError(c, err)
	}
	add(c, s, v[:1])
	raw("not json at all")
	add(c, s, v[1:2])
	raw(`[1,2,3]`)
	raw(`{"unterminated":`)
	add(c, s, v[2:4])
	raw(`"a string"`)

	requireItems(c, v, all(c, s), "corrupt records hide no valid item")
	require.NotEmpty(c, cr.CorruptReports(id), "corrupt records are reported, never skipped silently")
	for _, r := range cr.CorruptReports(id) {
		require.Equal(c, id, r.SessionID, "a report names its session")
		require.NotEmpty(c, r.Position, "a report names the record's position")
	}
	for n := 1; n <= 5; n++ {
		got, err := session.Latest(c.Context(), s, n)
		require.NoError(c, err)
		requireItems(c, v[max(len(v)-n, 0):], got, "latest %d counts valid items only", n)
	}
	survivors := func(what string) {
		c.Helper()
		before := len(cr.CorruptReports(id))
		all(c, s)
		var survived []string
		for _, r := range cr.CorruptReports(id)[before:] {
			survived = append(survived, string(r.Raw))
		}
		require.ElementsMatch(c, []string{"not json at all", `[1,2,3]`, `{"unterminated":`, `"a string"`}, survived,
			"every unreadable record survives %s, the one on top included, byte for byte", what)
	}
	// A pop never removes an unreadable record: it walks past it to the
	// newest valid item or, where the store can pop only the newest, it
	// fails with ErrCorruptRecord and removes nothing.
	it, ok, err := s.PopItem(c.Context())
	if errors.Is(err, session.ErrCorruptRecord) {
		requireItems(c, v, all(c, s), "a refused pop removes nothing")
		survivors("a refused pop")
	} else {
		require.NoError(c, err)
		require.True(c, ok)
		require.Equal(c, v[3].String(), it.String(), "pop returns the newest valid item")
		requireItems(c, v[:3], all(c, s), "pop took only the newest valid item")
		it, ok, err = s.PopItem(c.Context())
		require.NoError(c, err)
		require.True(c, ok)
		require.Equal(c, v[2].String(), it.String())
		requireItems(c, v[:2], all(c, s), "no other valid item disappeared")
		survivors("the pops")
	}

	// Clear removes the corrupt records too: a check leaves nothing behind.
	require.NoError(c, s.Clear(c.Context()))
	seen := len(cr.CorruptReports(id))
	add(c, s, v[:1])
	requireItems(c, v[:1], all(c, s), "a cleared session holds only what came after")
	require.Len(c, cr.CorruptReports(id), seen, "clear removed every corrupt record: reading reports none")
}
