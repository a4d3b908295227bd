// Package cursortest holds the property the adapters' cursor fuzz targets
// share: a cursor is accepted only as the adapter writes it.
package cursortest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentsessions/sessions/session"
)

// Parsed checks one parse of cursor c, which read as p or failed with
// err: an error must wrap session.ErrInvalidCursor (or one of also); the
// zero cursor must read as the zero position; any other cursor accepted
// must be exactly what format writes for p, so that no spelling the
// adapter never returned reads as a position.
func Parsed[P any](t testing.TB, c string, p P, err error, format func(P) string, also ...error) {
	t.Helper()
	switch {
	case err != nil:
		if errors.Is(err, session.ErrInvalidCursor) {
			return
		}
		for _, e := range also {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("cursor %q: %v, not session.ErrInvalidCursor", c, err)
	case c == "":
		if !reflect.ValueOf(&p).Elem().IsZero() {
			t.Fatalf("the zero cursor reads as %+v", p)
		}
	case format(p) != c:
		t.Fatalf("cursor %q reads as %+v, which is written %q", c, p, format(p))
	}
}
