package pyjson

// Escape classes for the bytes of a decoded string: 0 means the byte is
// copied as is, a letter is the short escape (\n, \", ...), 'u' is a \u00XX
// escape of the byte itself, and 'M' starts a multi-byte sequence that needs
// a closer look.
var (
	// quoteASCII is json.dumps' ESCAPE_ASCII: DEL and non-ASCII escaped.
	quoteASCII = makeQuoteTable(true)
	// quoteUnicode is json.dumps' ESCAPE with ensure_ascii=False: only '"',
	// '\\' and control characters escaped; 0xED may start a surrogate.
	quoteUnicode = makeQuoteTable(false)
)

func makeQuoteTable(ensureASCII bool) (t [256]byte) {
	for c := 0; c < 0x20; c++ {
		t[c] = 'u'
	}
	t['"'] = '"'
	t['\\'] = '\\'
	t['\n'] = 'n'
	t['\r'] = 'r'
	t['\t'] = 't'
	t['\b'] = 'b'
	t['\f'] = 'f'
	if ensureASCII {
		t[0x7F] = 'u'
		for c := 0x80; c < 0x100; c++ {
			t[c] = 'M'
		}
	} else {
		t[0xED] = 'M'
	}
	return t
}

const hexDigits = "0123456789abcdef"

func appendU(dst []byte, u rune) []byte {
	return append(dst, '\\', 'u', hexDigits[u>>12&0xF], hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
}

// appendQuoted appends s (decoded string text, see node) as json.dumps
// writes a str, using quote table t.
func appendQuoted(dst, s []byte, t *[256]byte) []byte {
	dst = append(dst, '"')
	run := 0
	for i := 0; i < len(s); {
		c := s[i]
		cls := t[c]
		if cls == 0 {
			i++
			continue
		}
		dst = append(dst, s[run:i]...)
		switch cls {
		case 'u':
			dst = appendU(dst, rune(c))
			i++
		case 'M':
			// The text was validated while parsing, so the sequence is
			// complete and well formed (surrogates allowed).
			switch {
			case c < 0xE0:
				dst = appendU(dst, rune(c&0x1F)<<6|rune(s[i+1]&0x3F))
				i += 2
			case c < 0xF0:
				cp := rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
				if t == &quoteUnicode && (cp < 0xD800 || cp > 0xDFFF) {
					// Not a surrogate: written raw without ensure_ascii.
					dst = append(dst, s[i:i+3]...)
				} else {
					dst = appendU(dst, cp)
				}
				i += 3
			default:
				cp := rune(c&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F)
				cp -= 0x10000
				dst = appendU(dst, 0xD800+cp>>10)
				dst = appendU(dst, 0xDC00+cp&0x3FF)
				i += 4
			}
		default:
			dst = append(dst, '\\', cls)
			i++
		}
		run = i
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}
