package session

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The lookups below run on bytes scanObject accepted, so they only skip:
// they never need to validate again.

// lookup returns the value of the top-level member named key (after
// unescaping, as Python compares keys), the last one when the key repeats.
func (d *itemData) lookup(key string) ([]byte, bool) {
	raw, ix := d.raw, &d.ix
	var val []byte
	found := false
	n := int(ix.n)
	for j := 0; j < n; j++ {
		k := int(ix.at[j])
		// A name whose first byte is not an escape starts with that byte
		// once decoded: most names are told apart by it alone.
		if c := raw[k+1]; len(key) > 0 && c != key[0] && c != '\\' {
			continue
		}
		ke := keyEnd(raw, k)
		if !nameIs(raw[k+1:ke-1], key) {
			continue
		}
		v := skipSpace(raw, skipSpace(raw, ke)+1) // past ':'
		var end int
		switch {
		case j+1 < n:
			end = endBefore(raw, int(ix.at[j+1]))
		case !ix.more:
			end = trimSpaceBack(raw, int(ix.close))
		default:
			end = skipValue(raw, v)
		}
		val, found = raw[v:end:end], true
	}
	if !ix.more {
		return val, found
	}
	// Members past the inline index: walk them.
	var i int
	if n == 0 {
		i = skipSpace(raw, 0) + 1 // after '{'
	} else {
		k := int(ix.at[n-1])
		i = skipValue(raw, skipSpace(raw, skipSpace(raw, keyEnd(raw, k))+1))
	}
	for {
		i = skipSpace(raw, i)
		if raw[i] == '}' {
			return val, found
		}
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		k := i
		i = skipSpace(raw, skipValue(raw, k)) + 1 // past the key and ':'
		v := skipSpace(raw, i)
		i = skipValue(raw, v)
		if keyIs(raw, k, v, key) {
			val, found = raw[v:i:i], true
		}
	}
}

// keyIs reports whether the member name whose opening quote is at raw[k],
// with its value at raw[v], decodes to key.
func keyIs(raw []byte, k, v int, key string) bool {
	// The closing quote: back from the value over whitespace, ':' and
	// whitespace.
	e := trimSpaceBack(raw, trimSpaceBack(raw, v)-1) - 1
	return nameIs(raw[k+1:e], key)
}

// nameIs reports whether the body of a member name (between its quotes)
// decodes to key. An escape only ever makes the body longer than the text
// it stands for, so the lengths settle most names without a search.
func nameIs(name []byte, key string) bool {
	switch {
	case len(name) == len(key):
		return string(name) == key && bytes.IndexByte(name, '\\') < 0
	case len(name) > len(key) && bytes.IndexByte(name, '\\') >= 0:
		return unescape(name) == key
	}
	return false
}

// keyEnd returns the index after the closing quote of the member name
// whose opening quote is at raw[k]. Names are short: a plain loop beats
// a search call.
func keyEnd(raw []byte, k int) int {
	i := k + 1
	for {
		switch raw[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2 // the escaped byte never ends the name
		default:
			i++
		}
	}
}

// endBefore returns the end of the value whose member is followed by the
// member name at raw[next]: back over whitespace, ',' and whitespace.
func endBefore(raw []byte, next int) int {
	return trimSpaceBack(raw, trimSpaceBack(raw, next)-1)
}

// trimSpaceBack returns i moved back over the whitespace before raw[i].
func trimSpaceBack(raw []byte, i int) int {
	for i > 0 {
		switch raw[i-1] {
		case ' ', '\t', '\n', '\r':
			i--
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index after the valid JSON value at raw[i].
func skipValue(raw []byte, i int) int {
	switch raw[i] {
	case '"':
		return skipValidString(raw, i)
	case '{', '[':
		depth := 0
		for {
			switch raw[i] {
			case '"':
				i = skipValidString(raw, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // number, literal or token: up to the next delimiter
		for i < len(raw) {
			switch raw[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipValidString returns the index after the valid string at raw[i]: the
// first quote not escaped by an odd run of backslashes.
func skipValidString(raw []byte, i int) int {
	i++
	for {
		i += bytes.IndexByte(raw[i:], '"')
		bs := 0
		for raw[i-1-bs] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			return i + 1
		}
		i++
	}
}

// stringValue returns the text of the valid JSON string token s. Without
// escapes it shares s's memory (items are immutable); escapes are decoded
// as encoding/json decodes them, an unpaired surrogate as U+FFFD.
func stringValue(s []byte) string {
	body := s[1 : len(s)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return unsafe.String(unsafe.SliceData(body), len(body))
	}
	return unescape(body)
}

// unescape decodes the body of a valid JSON string that holds escapes.
func unescape(body []byte) string {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch body[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(body[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, hex4(body[i+2:])); pair != utf8.RuneError {
						r = pair
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, body[i+1])
		}
		i += 2
	}
	return string(out)
}

// hex4 decodes four hex digits known to be valid.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
