package session

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unicode/utf8"
)

// MaxItemDepth bounds how deeply an item's containers nest, as
// encoding/json bounds them: a deeper item is refused, and the error says
// so.
const MaxItemDepth = 10000

const maxDepth = MaxItemDepth

// inlineMembers is how many top-level members an Item indexes inline. The
// Responses-API items have 3 to 8; lookups past them walk the rest of the
// object.
const inlineMembers = 8

// index locates the top-level members of an item's object, recorded by
// scanObject while it validates: at[j] holds the offset of member j's key
// (its opening quote). Everything else (the key's closing quote, the value,
// the value's end) is found from these by skipping the key and the
// whitespace and punctuation around it, so the index costs 4 bytes per
// member and an itemData fits a 64-byte allocation.
type index struct {
	n     uint8  // members recorded in at
	more  bool   // the object has members beyond at (or none were recorded)
	close uint32 // offset of the object's closing brace
	at    [inlineMembers]uint32
}

// validObject reports whether b is exactly one JSON object with optional
// surrounding whitespace, in valid UTF-8 (see scanObject).
func validObject(b []byte) bool {
	var ix index
	return scanObject(b, &ix)
}

// scanObject reports whether b is exactly one JSON object (RFC 8259, plus
// the NaN, Infinity and -Infinity tokens Python's json module reads and
// writes) with optional surrounding whitespace, in valid UTF-8, and records
// its top-level members in ix. It is one pass with no allocation for depths
// up to 64, which matters because every adapter runs it on every record it
// reads.
func scanObject(b []byte, ix *index) bool {
	*ix = index{}
	if uint64(len(b)) > math.MaxUint32 {
		ix.more = true // offsets do not fit: lookups walk the object
		ix = &index{}
	}
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
				if len(stack) == 1 {
					ix.close = uint32(i)
				}
				i++
				stack = stack[:len(stack)-1]
				goto afterValue
			}
			if c == '{' {
				k := i
				if i = skipKey(b, i); i < 0 {
					return false
				}
				if len(stack) == 1 {
					ix.record(k)
				}
			}
			continue
		case c == '"':
			if i = skipString(b, i); i < 0 {
				return false
			}
		case c >= '0' && c <= '9':
			if i = skipNumber(b, i); i < 0 {
				return false
			}
		case c == '-':
			if i+1 < len(b) && b[i+1] == 'I' {
				if !hasLiteral(b, i, "-Infinity") {
					return false
				}
				i += 9
			} else if i = skipNumber(b, i); i < 0 {
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
		case c == 'N':
			if !hasLiteral(b, i, "NaN") {
				return false
			}
			i += 3
		case c == 'I':
			if !hasLiteral(b, i, "Infinity") {
				return false
			}
			i += 8
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
					k := i
					if i = skipKey(b, i); i < 0 {
						return false
					}
					if len(stack) == 1 {
						ix.record(k)
					}
				}
			case '}', ']':
				if b[i] != top+2 {
					return false
				}
				if len(stack) == 1 {
					ix.close = uint32(i)
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

// record notes a top-level member whose key starts at k.
func (ix *index) record(k int) {
	if ix.n < inlineMembers {
		ix.at[ix.n] = uint32(k)
		ix.n++
		return
	}
	ix.more = true
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
		// Eight bytes at a time: skip plain ones, and jump straight to the
		// first byte that needs a look (most strings are short).
		for len(b)-i >= 8 {
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
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

// special8 returns a mask of the bytes of v (little-endian: the first byte
// lowest) that do not stand for themselves inside a JSON string: non-ASCII,
// control characters, '"' and '\\'. A byte above a flagged one may be
// flagged wrongly (a borrow), but the lowest flagged byte is always right,
// which is all it is used for: zero means all eight are plain.
func special8(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	nonASCII := v & highs
	control := (v - 0x20*ones) &^ v & highs // some byte < 0x20
	quote := v ^ ('"' * ones)
	backslash := v ^ ('\\' * ones)
	zeroQ := (quote - ones) &^ quote & highs
	zeroB := (backslash - ones) &^ backslash & highs
	return nonASCII | control | zeroQ | zeroB
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
