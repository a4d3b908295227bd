package session

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// validObjectOld is the validator before the Python tokens and the member
// index (commit 4349efe), kept to measure what they cost on the read path.
// It reported whether b is exactly one JSON object (RFC 8259) with
// optional surrounding whitespace, in valid UTF-8. It is one pass with no
// allocation for depths up to 64, which matters because every adapter runs
// it on every record it reads.
func validObjectOld(b []byte) bool {
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
				if i = skipKeyOld(b, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = skipStringOld(b, i); i < 0 {
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
					if i = skipKeyOld(b, i); i < 0 {
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

// skipKeyOld returned the index of the value after the member name and colon
// starting at b[i], or -1.
func skipKeyOld(b []byte, i int) int {
	if i = skipStringOld(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// skipStringOld returned the index after the string starting at b[i], or -1.
func skipStringOld(b []byte, i int) int {
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

// BenchmarkScanCost compares, in one binary, the validator before this
// change with scanObject (tokens + member index) and with the full
// read-path construction of an Item (scan + the one allocation).
func BenchmarkScanCost(b *testing.B) {
	large := []byte(`{"type":"function_call_output","output":"` + strings.Repeat("0123456789abcdef", 4096) + `","call_id":"call_1"}`)
	for _, c := range []struct {
		name string
		in   []byte
	}{{"300B", benchItem}, {"64KB", large}} {
		b.Run(c.name+"/old", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				if !validObjectOld(c.in) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			var ix index
			for b.Loop() {
				if !scanObject(c.in, &ix) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/item", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := newItem(c.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIndexCost weighs indexing at validation against a lazily built
// index. "record" scans an item whose seven members are top-level (seven
// recorded); "norecord" scans the same members one level down (one
// recorded), which isolates the recording. "lazywalk" is what a lazy index
// would add on the first accessor call: a walk over every member (here a
// lookup with nothing recorded).
func BenchmarkIndexCost(b *testing.B) {
	large := `"` + strings.Repeat("0123456789abcdef", 4096) + `"`
	for _, c := range []struct{ name, output string }{{"300B", `"The weather in Paris is clear, 18 degrees."`}, {"64KB", large}} {
		members := `"type":"function_call_output","id":"fco_1","call_id":"call_1","output":` + c.output +
			`,"status":"completed","_agents_tool_title":"t","extra":[1,2,3]`
		flat := []byte(`{` + members + `}`)
		nested := []byte(`{"x":{` + members + `}}`)
		var ix index
		b.Run(c.name+"/record", func(b *testing.B) {
			for b.Loop() {
				scanObject(flat, &ix)
			}
		})
		b.Run(c.name+"/norecord", func(b *testing.B) {
			for b.Loop() {
				scanObject(nested, &ix)
			}
		})
		d := &itemData{raw: flat, ix: index{more: true}}
		b.Run(c.name+"/lazywalk", func(b *testing.B) {
			for b.Loop() {
				if _, ok := d.lookup("call_id"); !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}
