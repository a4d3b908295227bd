package conformance

import (
	"fmt"
	"strings"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func init() {
	register(
		clause{"core/empty-session", GroupBase, 0, clauseEmptySession},
		clause{"core/order", GroupBase, 0, clauseOrder},
		clause{"core/batch-contiguity", GroupBase, 0, clauseBatchContiguity},
		clause{"core/round-trip", GroupBase, 0, clauseRoundTrip},
		clause{"core/empty-batch", GroupBase, 0, clauseEmptyBatch},
		clause{"core/pop", GroupBase, 0, clausePop},
		clause{"core/pop-empty", GroupBase, 0, clausePopEmpty},
		clause{"core/clear", GroupBase, 0, clauseClear},
		clause{"core/isolation", GroupBase, 0, clauseIsolation},
		clause{"core/peer-visibility", GroupBase, 0, clausePeerVisibility},
	)
}

// requireItems asserts that got holds exactly want, byte for byte.
func requireItems(c *C, want, got []session.Item, msgAndArgs ...any) {
	c.Helper()
	require.Equal(c, texts(want), texts(got), msgAndArgs...)
}

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

func all(c *C, s session.Session) []session.Item {
	c.Helper()
	items, err := s.Items(c.Context())
	require.NoError(c, err)
	return items
}

func add(c *C, s session.Session, items []session.Item) {
	c.Helper()
	require.NoError(c, s.AddItems(c.Context(), items))
}

func clauseEmptySession(c *C) {
	s := c.Fresh("empty")
	require.Equal(c, c.ID("empty"), s.SessionID())
	items := all(c, s)
	require.Empty(c, items, "a session never written reads as empty")
	latest, err := session.Latest(c.Context(), s, 5)
	require.NoError(c, err)
	require.Empty(c, latest)
}

func clauseOrder(c *C) {
	s := c.Fresh("order")
	a, b, d := Numbered("a", 3), Numbered("b", 1), Numbered("c", 4)
	add(c, s, a)
	add(c, s, b)
	add(c, s, d)
	want := append(append(append([]session.Item{}, a...), b...), d...)
	requireItems(c, want, all(c, s), "reads are oldest first, batches in the order appended")
}

func clauseBatchContiguity(c *C) {
	s := c.Fresh("contig")
	p := c.OpenPeer(s.SessionID())
	x, y := Numbered("x", 50), Numbered("y", 50)
	add(c, s, x)
	add(c, p, y)
	add(c, s, x[:1])
	want := append(append(append([]session.Item{}, x...), y...), x[0])
	requireItems(c, want, all(c, s))
	requireItems(c, want, all(c, p), "a peer handle reads the same history")
}

func clauseRoundTrip(c *C) {
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

func clauseEmptyBatch(c *C) {
	s := c.Fresh("emptybatch")
	require.NoError(c, s.AddItems(c.Context(), nil))
	require.NoError(c, s.AddItems(c.Context(), []session.Item{}))
	require.Empty(c, all(c, s))
	add(c, s, Numbered("a", 2))
	require.NoError(c, s.AddItems(c.Context(), nil))
	requireItems(c, Numbered("a", 2), all(c, s))
}

func clausePop(c *C) {
	s := c.Fresh("pop")
	items := Numbered("p", 4)
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

func clausePopEmpty(c *C) {
	s := c.Fresh("popempty")
	it, ok, err := s.PopItem(c.Context())
	require.NoError(c, err, "pop on an empty session reports empty without an error")
	require.False(c, ok)
	require.False(c, it.Valid())
}

func clauseClear(c *C) {
	s := c.Fresh("clear")
	other := c.Fresh("clear-other")
	add(c, s, Numbered("a", 3))
	add(c, other, Numbered("o", 2))
	require.NoError(c, s.Clear(c.Context()))
	require.Empty(c, all(c, s))
	require.NoError(c, s.Clear(c.Context()), "clearing an empty session is fine")
	requireItems(c, Numbered("o", 2), all(c, other), "clear touches no other session")
	add(c, s, Numbered("b", 1))
	requireItems(c, Numbered("b", 1), all(c, s), "a cleared session takes new items")
}

func clauseIsolation(c *C) {
	base := c.ID("iso")
	ids := []string{base, base + "x", base + ":x", base[:len(base)-1]}
	for i, id := range ids {
		add(c, c.Open(id), Numbered(fmt.Sprintf("s%d", i), i+1))
	}
	for i, id := range ids {
		requireItems(c, Numbered(fmt.Sprintf("s%d", i), i+1), all(c, c.Open(id)), "session %q", id)
	}
	_, ok, err := c.Open(ids[1]).PopItem(c.Context())
	require.NoError(c, err)
	require.True(c, ok)
	requireItems(c, Numbered("s0", 1), all(c, c.Open(ids[0])), "pop touches no other session")
}

func clausePeerVisibility(c *C) {
	s := c.Fresh("peer")
	p := c.OpenPeer(s.SessionID())
	add(c, s, Numbered("a", 2))
	requireItems(c, Numbered("a", 2), all(c, p))
	it, ok, err := p.PopItem(c.Context())
	require.NoError(c, err)
	require.True(c, ok)
	assert.Equal(c, Numbered("a", 2)[1].String(), it.String())
	requireItems(c, Numbered("a", 1), all(c, s), "a pop through the peer is seen by the first handle")
	require.NoError(c, p.Clear(c.Context()))
	require.Empty(c, all(c, s))
}
