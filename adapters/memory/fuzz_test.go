package memory

import (
	"strconv"
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/cursortest"
	"github.com/agentsessions/sessions/session"
)

// FuzzFollowCursor: a cursor ItemsSince accepts is one it writes (or the
// zero cursor); any other string is session.ErrInvalidCursor.
func FuzzFollowCursor(f *testing.F) {
	for _, c := range []string{"", "m", "m0", "m1", "m01", "m+1", "m-1", "m18446744073709551615", "m18446744073709551616", "x1", "s1:00000000:1"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		n, err := parseCursor(session.Cursor(c))
		cursortest.Parsed(t, c, n, err, func(n uint64) string { return cursorPrefix + strconv.FormatUint(n, 10) })
	})
}
