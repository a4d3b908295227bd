package pyjson

// plain reports the ASCII bytes that stand for themselves inside a JSON
// string: everything from U+0020 up to U+007F except '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// utf8Len returns the length of the UTF-8 sequence starting at b[0] (which
// is >= 0x80), or 0 if it is not valid. Like Python's UTF-8 codec with the
// "surrogatepass" handler json.loads uses for bytes, it accepts encoded
// surrogates (ED A0..BF xx).
func utf8Len(b []byte) int {
	cont := func(i int) bool { return i < len(b) && b[i]&0xC0 == 0x80 }
	c := b[0]
	switch {
	case c >= 0xC2 && c <= 0xDF:
		if cont(1) {
			return 2
		}
	case c == 0xE0:
		if len(b) > 1 && b[1] >= 0xA0 && cont(1) && cont(2) {
			return 3
		}
	case c >= 0xE1 && c <= 0xEF:
		if cont(1) && cont(2) {
			return 3
		}
	case c == 0xF0:
		if len(b) > 1 && b[1] >= 0x90 && cont(1) && cont(2) && cont(3) {
			return 4
		}
	case c >= 0xF1 && c <= 0xF3:
		if cont(1) && cont(2) && cont(3) {
			return 4
		}
	case c == 0xF4:
		if len(b) > 1 && b[1] <= 0x8F && cont(1) && cont(2) && cont(3) {
			return 4
		}
	}
	return 0
}

// appendCodePoint appends cp with the UTF-8 bit pattern, surrogates
// included (they become ED A0..BF xx, as Python's surrogatepass writes them).
func appendCodePoint(dst []byte, cp rune) []byte {
	switch {
	case cp < 0x80:
		return append(dst, byte(cp))
	case cp < 0x800:
		return append(dst, 0xC0|byte(cp>>6), 0x80|byte(cp)&0x3F)
	case cp < 0x10000:
		return append(dst, 0xE0|byte(cp>>12), 0x80|byte(cp>>6)&0x3F, 0x80|byte(cp)&0x3F)
	default:
		return append(dst, 0xF0|byte(cp>>18), 0x80|byte(cp>>12)&0x3F, 0x80|byte(cp>>6)&0x3F, 0x80|byte(cp)&0x3F)
	}
}

// hex4 decodes the four hex digits of a \u escape, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// str parses the string starting at the '"' at p.pos and appends its node.
// A string without escapes refers to its bytes in src; otherwise the decoded
// text is written to p.buf.
func (p *parser) str() error {
	src := p.src
	start := p.pos + 1
	i := start
	for {
		if i >= len(src) {
			return syntaxError(start-1, "unterminated string")
		}
		c := src[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			p.pos = i + 1
			idx := len(p.nodes)
			p.nodes = append(p.nodes, node{kind: kindString, next: int32(idx + 1), lo: int32(start), hi: int32(i)})
			return nil
		case c == '\\':
			return p.strEscaped(start, i)
		case c < 0x20:
			return syntaxError(i, "invalid control character in string")
		default:
			n := utf8Len(src[i:])
			if n == 0 {
				return syntaxError(i, "invalid UTF-8")
			}
			i += n
		}
	}
}

// strEscaped continues str from the first backslash at i, decoding the
// string into p.buf.
func (p *parser) strEscaped(start, i int) error {
	src := p.src
	lo := len(p.buf)
	p.buf = append(p.buf, src[start:i]...)
	run := i // start of the pending run of bytes copied verbatim
	for {
		if i >= len(src) {
			return syntaxError(start-1, "unterminated string")
		}
		c := src[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			p.buf = append(p.buf, src[run:i]...)
			if len(p.buf) > 1<<31-1 {
				return syntaxError(i, "decoded strings larger than 2 GiB")
			}
			p.pos = i + 1
			idx := len(p.nodes)
			p.nodes = append(p.nodes, node{kind: kindString, inBuf: true, next: int32(idx + 1), lo: int32(lo), hi: int32(len(p.buf))})
			return nil
		case c == '\\':
			p.buf = append(p.buf, src[run:i]...)
			if i+1 >= len(src) {
				return syntaxError(start-1, "unterminated string")
			}
			esc := src[i+1]
			i += 2
			switch esc {
			case '"', '\\', '/':
				p.buf = append(p.buf, esc)
			case 'b':
				p.buf = append(p.buf, '\b')
			case 'f':
				p.buf = append(p.buf, '\f')
			case 'n':
				p.buf = append(p.buf, '\n')
			case 'r':
				p.buf = append(p.buf, '\r')
			case 't':
				p.buf = append(p.buf, '\t')
			case 'u':
				cp := hex4(src[i:])
				if cp < 0 {
					return syntaxError(i-2, `invalid \uXXXX escape`)
				}
				i += 4
				// A high surrogate directly followed by an escaped low
				// surrogate is one code point; anything else leaves a lone
				// surrogate, as CPython's scanner does.
				if cp >= 0xD800 && cp <= 0xDBFF && i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
					lowCP := hex4(src[i+2:])
					if lowCP < 0 {
						return syntaxError(i, `invalid \uXXXX escape`)
					}
					if lowCP >= 0xDC00 && lowCP <= 0xDFFF {
						cp = 0x10000 + (cp-0xD800)<<10 + (lowCP - 0xDC00)
						i += 6
					}
				}
				p.buf = appendCodePoint(p.buf, cp)
			default:
				return syntaxError(i-2, "invalid escape")
			}
			run = i
		case c < 0x20:
			return syntaxError(i, "invalid control character in string")
		default:
			n := utf8Len(src[i:])
			if n == 0 {
				return syntaxError(i, "invalid UTF-8")
			}
			i += n
		}
	}
}
