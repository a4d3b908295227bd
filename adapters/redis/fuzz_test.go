package redis

import (
	"net/url"
	"strings"
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/cursortest"
	"github.com/agentsessions/sessions/session"
)

// FuzzEscapeID: escaping is injective and keeps braces out of the tag, and
// ParseKey inverts the native layout's keys.
func FuzzEscapeID(f *testing.F) {
	for _, id := range hostileIDs {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		esc := escapeID(id)
		if strings.ContainsAny(esc, "{}:") {
			t.Fatalf("escaped %q holds a brace or colon: %q", id, esc)
		}
		back, ok := unescapeID(esc)
		if !ok || back != id {
			t.Fatalf("unescape(escape(%q)) = %q, %v", id, back, ok)
		}
		if id == "" {
			return
		}
		for i, k := range sessionKeys("p", id) {
			if hashTag(k) != esc {
				t.Fatalf("key %q of %q has tag %q, want %q", k, id, hashTag(k), esc)
			}
			got, kind, ok := ParseKey("p", k)
			if !ok || got != id || kind != KeyKind(i+1) {
				t.Fatalf("ParseKey(%q) = %q, %v, %v", k, got, kind, ok)
			}
		}
	})
}

// FuzzParseKey: any key ParseKey accepts is exactly the key the layout
// builds for the id it returns (so no two ids share a key).
func FuzzParseKey(f *testing.F) {
	for _, k := range []string{
		"agents:session:{abc}:items", "agents:session:{a%3Ab}:meta", "agents:session:{}:items",
		"agents:session:{a%3ab}:items", "agents:session:{a%3}:items", "agents:session:{{}:items",
		"agents:session:{x}y}:items", "agents:session:abc:messages", "agents:native:{abc}:checkpoints", "",
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, kind, ok := ParseKey("", key)
		if !ok {
			return
		}
		if id == "" {
			t.Fatalf("ParseKey(%q) accepted an empty id", key)
		}
		if want := sessionKeys(DefaultKeyPrefix, id)[kind-1]; want != key {
			t.Fatalf("ParseKey(%q) = %q, whose key is %q", key, id, want)
		}
	})
}

// FuzzSeedURL: rewriting the seed list of a cluster or sentinel URL never
// panics and gives a URL that parses, with every seed kept.
func FuzzSeedURL(f *testing.F) {
	for _, s := range []string{
		"h1:1", "h1:1,h2:2", "u:p@h1:1,h2:2/0?dial_timeout=3", "h1:1,", "@,", "a@b@c:1,d:2#frag", "[::1]:1,[::2]:2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		u, err := seedURL("redis", rest)
		if err != nil {
			return
		}
		p, err := url.Parse(u)
		if err != nil {
			t.Fatalf("seedURL(%q) = %q, which does not parse: %v", rest, u, err)
		}
		_ = redactURL(u)
		authority := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			authority = rest[:i]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = authority[at+1:]
		}
		seeds := strings.Split(authority, ",")
		addrs := p.Query()["addr"]
		for _, s := range seeds[1:] {
			found := false
			for _, a := range addrs {
				found = found || a == s
			}
			if !found {
				t.Fatalf("seedURL(%q) = %q lost seed %q", rest, u, s)
			}
		}
	})
}

// FuzzFollowCursor: a cursor ItemsSince accepts is one it writes for the
// session (or the zero cursor); any other string is
// session.ErrInvalidCursor.
func FuzzFollowCursor(f *testing.F) {
	s := &Session{id: "s"}
	for _, p := range []position{{epoch: "00000000000000ff", x: 1}, {epoch: "0123456789abcdef", pops: 3, r: 4, x: 9}} {
		f.Add(string(s.formatCursor(p)))
	}
	for _, tail := range []string{"e:0:0:0", "e:0:01:1", "e:+0:1:1", "e:0:2:1", ":0:1:1", "e:0:1:1:1", "e:-1:1:1", "e:0:0:9223372036854775808"} {
		f.Add(cursorPrefix + sessionTag(s.id) + ":" + tail)
	}
	f.Add(cursorPrefix + sessionTag("other") + ":e:0:1:1")
	f.Fuzz(func(t *testing.T, c string) {
		p, err := s.parseCursor(session.Cursor(c))
		cursortest.Parsed(t, c, p, err, func(p position) string { return string(s.formatCursor(p)) })
	})
}

// FuzzListCursor: a listing cursor ListSessionsPage accepts is one it
// writes, and it never asks SCAN for a COUNT above the one a page uses.
func FuzzListCursor(f *testing.F) {
	for _, c := range []listCursor{{}, {addr: "127.0.0.1:7000", scan: 17}, {addr: "h:1", scan: 5, count: scanCount, next: 9, after: "an id with spaces"}} {
		f.Add(c.String())
	}
	for _, s := range []string{"r1 h:1 0 9223372036854775807 5 x", "r1 h:1 0 0 5 x", "r1 h:1 0 7 0 ", "r1 h:1 00 0 0 ", "r1 h:1 +0 0 0 ", "r2 h:1 0 0 0 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseListCursor(s)
		switch {
		case err != nil:
		case c.String() != s:
			t.Fatalf("%q reads as %#v, which a page writes as %q", s, c, c.String())
		case c.after == "" && (c.count != 0 || c.next != 0):
			t.Fatalf("%q: a cursor between batches with a COUNT or an end: %#v", s, c)
		case c.after != "" && (c.count < 1 || c.count > scanCount):
			t.Fatalf("%q: SCAN COUNT %d, outside 1..%d", s, c.count, scanCount)
		}
	})
}
