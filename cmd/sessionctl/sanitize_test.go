package main

import (
	"strconv"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzSanitize: whatever a store holds, what sanitize and quoteRaw print
// is valid UTF-8 without a control, C1 or format character, and quoteRaw
// gives the bytes back exactly.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\u009b31m", "a\u202eb", "\xff\xfe", "tab\there\r\n", "é ☃ 😀", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := sanitize(s)
		if !utf8.ValidString(out) {
			t.Fatalf("sanitize(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || unicode.Is(unicode.Cf, r) {
				t.Fatalf("sanitize(%q) = %q holds %U", s, out, r)
			}
		}
		q := quoteRaw([]byte(s), 0)
		back, err := strconv.Unquote(q)
		if err != nil || back != s {
			t.Fatalf("quoteRaw(%q) = %s does not give the bytes back", s, q)
		}
		if oneLine(s) != sanitize(oneLine(s)) {
			t.Fatalf("oneLine(%q) is not sanitized", s)
		}
	})
}
