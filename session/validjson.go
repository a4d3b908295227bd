package session

import (
	"bytes"
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
//
// It also notes the members TypeCallRole reads (see noteName), so that
// runstate's look at every item of a turn is two slices and no search.
type index struct {
	n     uint8  // members recorded in at
	more  bool   // the object has members beyond at (or none were recorded)
	tc    uint8  // 1 + the member j of the last "type" (low 4 bits) and "call_id" (high 4); 0: none
	fl    uint8  // hasRole, escName
	close uint32 // offset of the object's closing brace
	at    [inlineMembers]uint32
}

// The flags of index.fl.
const (
	hasRole = 1 << iota // a member is named "role"
	escName             // a name holds an escape that may spell one of the three: tc and hasRole do not count
)

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
// reads: strings, most of an item's bytes, are skipped eight bytes at a
// time, and the grammar is a few jumps between states of one function.
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
	inObject := true   // the innermost open container is an object
	c := byte('{')

open: // b[i] is c, '{' or '['
	if len(stack) == maxDepth {
		return false
	}
	stack = append(stack, c)
	inObject = c == '{'
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
		goto closed
	}
	if !inObject {
		goto value
	}

member: // at a member's name
	if i >= len(b) || b[i] != '"' {
		return false
	}
	if len(stack) == 1 {
		k := i
		if i = skipStringBody(b, i+1); i < 0 {
			return false
		}
		ix.record(k)
		ix.noteName(b, k, i)
	} else if i = skipStringBody(b, i+1); i < 0 {
		return false
	}
	if i < len(b) && b[i] == ':' {
		i++
	} else if i = skipSpace(b, i); i < len(b) && b[i] == ':' {
		i++
	} else {
		return false
	}
	i = skipSpace(b, i)

value: // at the start of a value
	if i >= len(b) {
		return false
	}
	switch c = b[i]; c {
	case '"':
		if i = skipStringBody(b, i+1); i < 0 {
			return false
		}
	case '{', '[':
		goto open
	case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i = skipNumber(b, i); i < 0 {
			return false
		}
	case '-':
		if i+1 < len(b) && b[i+1] == 'I' {
			if !hasLiteral(b, i, "-Infinity") {
				return false
			}
			i += 9
		} else if i = skipNumber(b, i); i < 0 {
			return false
		}
	case 't':
		if !hasLiteral(b, i, "true") {
			return false
		}
		i += 4
	case 'f':
		if !hasLiteral(b, i, "false") {
			return false
		}
		i += 5
	case 'n':
		if !hasLiteral(b, i, "null") {
			return false
		}
		i += 4
	case 'N':
		if !hasLiteral(b, i, "NaN") {
			return false
		}
		i += 3
	case 'I':
		if !hasLiteral(b, i, "Infinity") {
			return false
		}
		i += 8
	default:
		return false
	}

next: // after a value inside a container
	i = skipSpace(b, i)
	if i >= len(b) {
		return false
	}
	switch b[i] {
	case ',':
		i = skipSpace(b, i+1)
		if inObject {
			goto member
		}
		goto value
	case '}':
		if !inObject {
			return false
		}
	case ']':
		if inObject {
			return false
		}
	default:
		return false
	}

closed: // b[i] closes the innermost container
	if len(stack) == 1 {
		ix.close = uint32(i)
		return skipSpace(b, i+1) == len(b)
	}
	i++
	stack = stack[:len(stack)-1]
	inObject = stack[len(stack)-1] == '{'
	goto next
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

// noteName notes in tc and fl whether the member just recorded, whose
// name runs from the quote at b[k] to the one at b[e-1], is "type",
// "call_id" or "role". Only \uXXXX spells a letter or '_' with an escape,
// so an escaped spelling of one of the three is at least 9 bytes long
// ("\u0074ype"), and a name of the plain length is the plain name or
// another one. Past inlineMembers, more makes tc meaningless.
func (ix *index) noteName(b []byte, k, e int) {
	switch name := b[k+1 : e-1]; len(name) {
	case len("type"): // or "role"
		switch string(name) {
		case "type":
			ix.tc = ix.tc&0xf0 | ix.n
		case "role":
			ix.fl |= hasRole
		}
	case len("call_id"):
		if string(name) == "call_id" {
			ix.tc = ix.tc&0x0f | ix.n<<4
		}
	default:
		if len(name) >= len(`\u0074ype`) && bytes.IndexByte(name, '\\') >= 0 {
			ix.fl |= escName
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// skipStringBody returns the index after the string whose body starts at
// b[i] (just after the opening quote), or -1. Eight bytes at a time, it
// skips the plain ones and jumps straight to the first byte that needs a
// look; the closing quote is found there, the rest in skipStringSlow.
func skipStringBody(b []byte, i int) int {
	for len(b)-i >= 8 {
		if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			if b[i] == '"' {
				return i + 1
			}
			return skipStringSlow(b, i)
		}
		i += 8
	}
	if left := len(b) - i; left > 0 && len(b) >= 8 {
		// Fewer than eight bytes left (the end of an item's last string):
		// the last eight bytes of b, shifted so that b[i] is the lowest
		// and zeros, which special8 flags, fill in past the end.
		m := special8(binary.LittleEndian.Uint64(b[len(b)-8:]) >> (8 * (8 - left)))
		i += bits.TrailingZeros64(m) >> 3
		if i < len(b) && b[i] == '"' {
			return i + 1
		}
	}
	return skipStringSlow(b, i)
}

// skipStringSlow is skipStringBody from b[i] on, one byte, escape or
// rune at a time until eight plain bytes are ahead.
func skipStringSlow(b []byte, i int) int {
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
		// Back to eight bytes at a time when they are plain.
		for len(b)-i >= 8 {
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
	}
	return -1
}

// special8 returns a mask of the bytes of v (little-endian: the first byte
// lowest) that do not stand for themselves inside a JSON string: non-ASCII,
// control characters, '"' and '\\'. A byte above a flagged one may be
// flagged wrongly (a borrow), but the lowest flagged byte is always right,
// which is all it is used for: zero means all eight are plain.
//
// A byte's high bit is set in x-0x20 when it is below 0x20, in q-1 when
// it is '"' (q is v^'"'), in s-1 when it is '\\', and in v when it is not
// ASCII; every other way a high bit gets set (x-0x20 or q-1 on a byte
// above 0x80) is on a byte v flags already, and a borrow starts only at a
// flagged byte. So one AND with the high bits does for all four tests.
func special8(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := v ^ ('"' * ones)
	s := v ^ ('\\' * ones)
	return (v | (v - 0x20*ones) | (q - ones) | (s - ones)) & highs
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
