package session

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzFallbackCursor: a cursor ReadSince accepts for a session that is
// not a Follower is one it writes: "h1:<items read>:<32 lower-case hex
// digits>" (or the zero cursor); any other string is ErrInvalidCursor.
func FuzzFallbackCursor(f *testing.F) {
	items := []Item{MustItem(`{"a":1}`), MustItem(`{"b":2}`)}
	sum := fallbackSum(items)
	f.Add("")
	f.Add(string(fallbackCursor(nil)))
	f.Add(string(fallbackCursor(items)))
	for _, c := range []string{"h1:+2:" + sum, "h1:02:" + sum, "h1:-1:" + sum, "h1:2:" + strings.ToUpper(sum), "h1:2:" + strings.Repeat("z", 32), "h1:2:" + sum[:31], "h1:2:" + sum + "0", "h1:2", "h2:2:" + sum} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		n, got, err := parseFallbackCursor(Cursor(c))
		switch {
		case err != nil:
			if !errors.Is(err, ErrInvalidCursor) {
				t.Fatalf("%q: %v, not ErrInvalidCursor", c, err)
			}
		case c == "":
			if n != 0 || got != fallbackSum(nil) {
				t.Fatalf("the zero cursor reads as %d items summed %s", n, got)
			}
		case fallbackPrefix+strconv.Itoa(n)+":"+got != c || strings.Trim(got, "0123456789abcdef") != "":
			t.Fatalf("%q reads as %d items summed %q, which ReadSince never writes", c, n, got)
		}
	})
}
