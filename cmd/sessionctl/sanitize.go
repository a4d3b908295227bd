package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// sanitize returns s with everything a terminal would interpret escaped:
// C0 and C1 control characters (ESC, CR, BEL, …), DEL, Unicode format
// characters (bidirectional overrides) and invalid UTF-8 become \xNN or
// \uNNNN. (A backslash is left alone, so JSON stays readable: the output
// is for eyes, and -json is the exact form.)
// Stored data (roles, types, call ids, items) passes through it before it
// reaches a terminal.
func sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, unicode.Is(unicode.Cf, r), r == '\u2028', r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
