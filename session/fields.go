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
		ke, esc := keyEnd(raw, k)
		if !nameIs(raw[k+1:ke-1], esc, key) {
			continue
		}
		v := skipSpace(raw, skipSpace(raw, ke)+1) // past ':'
		end := ix.valueEnd(raw, j, v)
		val, found = raw[v:end:end], true
	}
	if !ix.more {
		return val, found
	}
	// Members past the inline index: walk them.
	for i := ix.pastInline(raw); ; {
		var k, v int
		if k, v, i = nextMember(raw, i); k < 0 {
			return val, found
		}
		if keyIs(raw, k, v, key) {
			val, found = raw[v:i:i], true
		}
	}
}

// typeCallRole is TypeCallRole: the members scanObject noted, when it
// could (noteName), or else walkNames.
func (d *itemData) typeCallRole() (typ, callID string, role bool) {
	raw, ix := d.raw, &d.ix
	if !ix.more && ix.fl&escName == 0 {
		// scanObject noted the three (noteName).
		var tv, cv []byte
		if j := int(ix.tc&0x0f) - 1; j >= 0 {
			tv = ix.valueAt(raw, j, int(ix.at[j])+len(`"type"`))
		}
		if j := int(ix.tc>>4) - 1; j >= 0 {
			cv = ix.valueAt(raw, j, int(ix.at[j])+len(`"call_id"`))
		}
		return stringOrEmpty(tv), stringOrEmpty(cv), ix.fl&hasRole != 0
	}
	return d.walkNames()
}

// walkNames is typeCallRole where a name may be escaped or members lie
// past the inline index: one pass over the members, most told apart by
// their first byte, and a name without escapes compared whole, closing
// quote and all. Only the last "type" and "call_id" are decoded.
func (d *itemData) walkNames() (typ, callID string, hasRole bool) {
	raw, ix := d.raw, &d.ix
	tj, cj := -1, -1   // the indexed members of the last "type" and "call_id"
	tke, cke := -1, -1 // the ends of their names
	n := int(ix.n)
	for j := 0; j < n; j++ {
		k := int(ix.at[j])
		switch raw[k+1] {
		case 't':
			if hasLiteral(raw, k+1, `type"`) {
				tj, tke = j, k+6
				continue
			}
		case 'c':
			if hasLiteral(raw, k+1, `call_id"`) {
				cj, cke = j, k+9
				continue
			}
		case 'r':
			if hasLiteral(raw, k+1, `role"`) {
				hasRole = true
				continue
			}
		case '\\':
		default:
			continue
		}
		ke, esc := keyEnd(raw, k)
		if !esc {
			continue
		}
		switch unescape(raw[k+1 : ke-1]) {
		case "type":
			tj, tke = j, ke
		case "call_id":
			cj, cke = j, ke
		case "role":
			hasRole = true
		}
	}
	var tv, cv []byte
	if tj >= 0 {
		tv = ix.valueAt(raw, tj, tke)
	}
	if cj >= 0 {
		cv = ix.valueAt(raw, cj, cke)
	}
	if ix.more {
		tv, cv, hasRole = walkTypeCallRole(raw, ix, tv, cv, hasRole)
	}
	return stringOrEmpty(tv), stringOrEmpty(cv), hasRole
}

// walkTypeCallRole is typeCallRole over the members past the inline
// index, given what the indexed members said.
func walkTypeCallRole(raw []byte, ix *index, tv, cv []byte, hasRole bool) ([]byte, []byte, bool) {
	for i := ix.pastInline(raw); ; {
		var k, v int
		if k, v, i = nextMember(raw, i); k < 0 {
			return tv, cv, hasRole
		}
		e := trimSpaceBack(raw, trimSpaceBack(raw, v)-1) - 1 // the name's closing quote
		name := raw[k+1 : e]
		if bytes.IndexByte(name, '\\') >= 0 {
			name = []byte(unescape(name))
		}
		switch string(name) {
		case "type":
			tv = raw[v:i]
		case "call_id":
			cv = raw[v:i]
		case "role":
			hasRole = true
		}
	}
}

// valueAt returns the value of indexed member j, whose name ends at ke.
// Most items are compact: ':' just after the name, ',' just after the
// value (no value ends in whitespace or a byte below it).
func (ix *index) valueAt(raw []byte, j, ke int) []byte {
	v := ke + 1
	if raw[ke] != ':' || raw[v] <= ' ' {
		v = skipSpace(raw, skipSpace(raw, ke)+1)
	}
	if j+1 < int(ix.n) {
		if end := int(ix.at[j+1]) - 1; raw[end] == ',' && raw[end-1] > ' ' {
			return raw[v:end]
		}
	}
	return raw[v:ix.valueEnd(raw, j, v)]
}

// stringOrEmpty returns the text of the value v when it is a string, and
// "" otherwise (or when v is nil).
func stringOrEmpty(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	return stringValue(v)
}

// valueEnd returns the end of the value at raw[v] of indexed member j.
func (ix *index) valueEnd(raw []byte, j, v int) int {
	switch {
	case j+1 < int(ix.n):
		return endBefore(raw, int(ix.at[j+1]))
	case !ix.more:
		return trimSpaceBack(raw, int(ix.close))
	default:
		return skipValue(raw, v)
	}
}

// pastInline returns the index after the value of the last indexed
// member (after the '{' when none is indexed), where the walk of the
// members past the index starts.
func (ix *index) pastInline(raw []byte) int {
	n := int(ix.n)
	if n == 0 {
		return skipSpace(raw, 0) + 1 // after '{'
	}
	ke, _ := keyEnd(raw, int(ix.at[n-1]))
	return skipValue(raw, skipSpace(raw, skipSpace(raw, ke)+1))
}

// nextMember steps over the member after raw[i] (past the value of the
// one before it): k is the opening quote of its name, v its value and
// next the index after the value; k is -1 at the object's end.
func nextMember(raw []byte, i int) (k, v, next int) {
	i = skipSpace(raw, i)
	if raw[i] == '}' {
		return -1, 0, i
	}
	if raw[i] == ',' {
		i = skipSpace(raw, i+1)
	}
	k = i
	i = skipSpace(raw, skipValue(raw, k)) + 1 // past the key and ':'
	v = skipSpace(raw, i)
	return k, v, skipValue(raw, v)
}

// keyIs reports whether the member name whose opening quote is at raw[k],
// with its value at raw[v], decodes to key.
func keyIs(raw []byte, k, v int, key string) bool {
	// The closing quote: back from the value over whitespace, ':' and
	// whitespace.
	e := trimSpaceBack(raw, trimSpaceBack(raw, v)-1) - 1
	name := raw[k+1 : e]
	return nameIs(name, bytes.IndexByte(name, '\\') >= 0, key)
}

// nameIs reports whether the body of a member name (between its quotes),
// which holds an escape when esc, decodes to key. An escape only ever
// makes the body longer than the text it stands for.
func nameIs(name []byte, esc bool, key string) bool {
	if !esc {
		return string(name) == key
	}
	return len(name) > len(key) && unescape(name) == key
}

// keyEnd returns the index after the closing quote of the member name
// whose opening quote is at raw[k], and whether the name holds an escape.
// Names are short: a plain loop beats a search call.
func keyEnd(raw []byte, k int) (end int, esc bool) {
	i := k + 1
	for {
		switch raw[i] {
		case '"':
			return i + 1, esc
		case '\\':
			i += 2 // the escaped byte never ends the name
			esc = true
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
