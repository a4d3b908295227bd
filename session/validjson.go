package session

import "unicode/utf8"

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

// validObject reports whether b is exactly one JSON object (RFC 8259) with
// optional surrounding whitespace, in valid UTF-8. It is one pass with no
// allocation for depths up to 64, which matters because every adapter runs
// it on every record it reads.
func validObject(b []byte) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	var small [64]byte
	stack := small[:0] // '{' or '[' per open container
	for {
		// At the start of a value.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return false
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				i++
				stack = stack[:len(stack)-1]
				goto afterValue
			}
			if c == '{' {
				if i = skipKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = skipString(b, i); i < 0 {
				return false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if i = skipNumber(b, i); i < 0 {
				return false
			}
		case c == 't':
			if !hasLiteral(b, i, "true") {
				return false
			}
			i += 4
		case c == 'f':
			if !hasLiteral(b, i, "false") {
				return false
			}
			i += 5
		case c == 'n':
			if !hasLiteral(b, i, "null") {
				return false
			}
			i += 4
		default:
			return false
		}
	afterValue:
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
				if top == '{' {
					if i = skipKey(b, i); i < 0 {
						return false
					}
				}
			case '}', ']':
				if b[i] != top+2 {
					return false
				}
				i++
				stack = stack[:len(stack)-1]
				continue
			default:
				return false
			}
			break
		}
	}
}

// skipKey returns the index of the value after the member name and colon
// starting at b[i], or -1.
func skipKey(b []byte, i int) int {
	if i = skipString(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// skipString returns the index after the string starting at b[i], or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return -1
			}
			i += n
		}
	}
	return -1
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipNumber returns the index after the number starting at b[i], or -1.
func skipNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return -1
		}
	}
	return i
}
