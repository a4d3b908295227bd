package contract

import (
	"fmt"
	"strings"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

func clauseEmptySession(c *suite.C) {
	s := c.Fresh("empty")
	require.Equal(c, c.ID("empty"), s.SessionID())
	items := all(c, s)
	require.Empty(c, items, "a session never written reads as empty")
	latest, err := session.Latest(c.Context(), s, 5)
	require.NoError(c, err)
	require.Empty(c, latest)
}

func clauseOrder(c *suite.C) {
	s := c.Fresh("order")
	a, b, d := numbered("a", 3), numbered("b", 1), numbered("c", 4)
	add(c, s, a)
	add(c, s, b)
	add(c, s, d)
	want := append(append(append([]session.Item{}, a...), b...), d...)
	requireItems(c, want, all(c, s), "reads are oldest first, batches in the order appended")
}

func clauseBatchContiguity(c *suite.C) {
	s := c.Fresh("contig")
	p := c.OpenPeer(s.SessionID())
	x, y := numbered("x", 50), numbered("y", 50)
	add(c, s, x)
	add(c, p, y)
	add(c, s, x[:1])
	want := append(append(append([]session.Item{}, x...), y...), x[0])
	requireItems(c, want, all(c, s))
	requireItems(c, want, all(c, p), "a peer handle reads the same history")
}

func clauseRoundTrip(c *suite.C) {
	deep := strings.Repeat(`{"a":[`, 256) + `1` + strings.Repeat(`]}`, 256)
	big := `{"type":"message","role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := []string{
		`{"type":"message","role":"user","content":"hello"}`,
		`{ "z" : 1 ,  "a" : [ 1 , 2 ] , "m" : { } }`,
		`{"content":"caf\u00e9 \u2603 \ud83d\ude00 and raw é ☃ 😀"}`,
		`{"s":"line\nbreak\ttab \"quote\" back\\slash \u0001 \u007f \/slash \u0000 nul"}`,
		`{"n":1.0,"m":1e2,"k":0.1,"big":12345678901234567890,"neg":-0.0,"tiny":1.5e-7}`,
		`{"dup":1,"dup":2}`,
		`{"emptyobj":{},"emptyarr":[],"unicode_key_é":null,"t":true,"f":false}`,
		`{"$where":"1","{tag}":"}","..":"*"}`,
		deep,
		big,
	}
	s := c.Fresh("roundtrip")
	items := c.Items(cases...)
	add(c, s, items)
	got := all(c, s)
	require.Len(c, got, len(items))
	for i := range items {
		if !items[i].Equal(got[i]) {
			c.Errorf("item %d changed in storage: sent %d bytes, got %d bytes (%.80q…)",
				i, len(items[i].Bytes()), len(got[i].Bytes()), got[i].String())
		}
	}
	last, err := session.Latest(c.Context(), s, 1)
	require.NoError(c, err)
	requireItems(c, items[len(items)-1:], last, "the 1 MiB item reads back exactly")
}

func clauseEmptyBatch(c *suite.C) {
	s := c.Fresh("emptybatch")
	require.NoError(c, s.AddItems(c.Context(), nil))
	require.NoError(c, s.AddItems(c.Context(), []session.Item{}))
	require.Empty(c, all(c, s))
	add(c, s, numbered("a", 2))
	require.NoError(c, s.AddItems(c.Context(), nil))
	requireItems(c, numbered("a", 2), all(c, s))
}

func clausePop(c *suite.C) {
	s := c.Fresh("pop")
	items := numbered("p", 4)
	add(c, s, items[:2])
	add(c, s, items[2:])
	for i := len(items) - 1; i >= 0; i-- {
		it, ok, err := s.PopItem(c.Context())
		require.NoError(c, err)
		require.True(c, ok, "pop %d", i)
		require.Equal(c, items[i].String(), it.String(), "pop returns the newest item")
		requireItems(c, items[:i], all(c, s))
	}
	_, ok, err := s.PopItem(c.Context())
	require.NoError(c, err)
	require.False(c, ok)
	add(c, s, items[:1])
	requireItems(c, items[:1], all(c, s), "a popped-empty session takes new items")
}

func clausePopEmpty(c *suite.C) {
	s := c.Fresh("popempty")
	it, ok, err := s.PopItem(c.Context())
	require.NoError(c, err, "pop on an empty session reports empty without an error")
	require.False(c, ok)
	require.False(c, it.Valid())
}

func clauseClear(c *suite.C) {
	s := c.Fresh("clear")
	other := c.Fresh("clear-other")
	add(c, s, numbered("a", 3))
	add(c, other, numbered("o", 2))
	require.NoError(c, s.Clear(c.Context()))
	require.Empty(c, all(c, s))
	require.NoError(c, s.Clear(c.Context()), "clearing an empty session is fine")
	requireItems(c, numbered("o", 2), all(c, other), "clear touches no other session")
	add(c, s, numbered("b", 1))
	requireItems(c, numbered("b", 1), all(c, s), "a cleared session takes new items")
}

func clauseIsolation(c *suite.C) {
	base := c.ID("iso")
	ids := []string{base, base + "x", base + ":x", base[:len(base)-1]}
	for i, id := range ids {
		add(c, c.Open(id), numbered(fmt.Sprintf("s%d", i), i+1))
	}
	for i, id := range ids {
		requireItems(c, numbered(fmt.Sprintf("s%d", i), i+1), all(c, c.Open(id)), "session %q", id)
	}
	_, ok, err := c.Open(ids[1]).PopItem(c.Context())
	require.NoError(c, err)
	require.True(c, ok)
	requireItems(c, numbered("s0", 1), all(c, c.Open(ids[0])), "pop touches no other session")
}

func clausePeerVisibility(c *suite.C) {
	s := c.Fresh("peer")
	p := c.OpenPeer(s.SessionID())
	add(c, s, numbered("a", 2))
	requireItems(c, numbered("a", 2), all(c, p))
	it, ok, err := p.PopItem(c.Context())
	require.NoError(c, err)
	require.True(c, ok)
	assert.Equal(c, numbered("a", 2)[1].String(), it.String())
	requireItems(c, numbered("a", 1), all(c, s), "a pop through the peer is seen by the first handle")
	require.NoError(c, p.Clear(c.Context()))
	require.Empty(c, all(c, s))
}
