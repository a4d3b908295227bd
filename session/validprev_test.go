package session

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// scanObjectPrev is the validator and indexer as it was before the
// single-pass scanner of validjson.go (commit f6604c3), kept as a second
// reference: the new scanner must accept exactly what it accepted and
// record exactly the same index.

// scanObjectPrev reports whether b is exactly one JSON object (RFC 8259, plus
// the NaN, Infinity and -Infinity tokens Python's json module reads and
// writes) with optional surrounding whitespace, in valid UTF-8, and records
// its top-level members in ix. It is one pass with no allocation for depths
// up to 64, which matters because every adapter runs it on every record it
// reads.
func scanObjectPrev(b []byte, ix *index) bool {
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
				if i = skipKeyPrev(b, i); i < 0 {
					return false
				}
				if len(stack) == 1 {
					ix.record(k)
				}
			}
			continue
		case c == '"':
			if i = skipStringPrev(b, i); i < 0 {
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
					if i = skipKeyPrev(b, i); i < 0 {
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

// skipKeyPrev returns the index of the value after the member name and colon
// starting at b[i], or -1.
func skipKeyPrev(b []byte, i int) int {
	if i = skipStringPrev(b, i); i < 0 {
		return -1
	}
	if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// skipStringPrev returns the index after the string starting at b[i], or -1.
func skipStringPrev(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	i++
	for i < len(b) {
		// Eight bytes at a time: skip plain ones, and jump straight to the
		// first byte that needs a look (most strings are short).
		for len(b)-i >= 8 {
			m := special8Prev(binary.LittleEndian.Uint64(b[i:]))
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

// special8Prev returns a mask of the bytes of v (little-endian: the first byte
// lowest) that do not stand for themselves inside a JSON string: non-ASCII,
// control characters, '"' and '\\'. A byte above a flagged one may be
// flagged wrongly (a borrow), but the lowest flagged byte is always right,
// which is all it is used for: zero means all eight are plain.
func special8Prev(v uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	nonASCII := v & highs
	control := (v - 0x20*ones) &^ v & highs // some byte < 0x20
	quote := v ^ ('"' * ones)
	backslash := v ^ ('\\' * ones)
	zeroQ := (quote - ones) &^ quote & highs
	zeroB := (backslash - ones) &^ backslash & highs
	return nonASCII | control | zeroQ | zeroB
}

// prevSeeds adds to validSeeds inputs around the scanner's jumps: members
// after containers, whitespace of every kind at every place, deep and
// mismatched closes, strings around the eight-byte width.
var prevSeeds = []string{
	"{ \"a\" : [ 1 , { \"b\" : [ ] } , [ { } ] ] , \"c\" : \"x\" }",
	"\t{\n\"a\"\r:\t1\n}\r\n", `{"a":[{"b":1}],"c":{"d":[2]},"e":3}`, `{"a":[{"b":1]}`, `{"a":{"b":1]}`,
	`{"a":[1]]}`, `{"a":{}}}`, `{"a":[],}`, `{"a" :1,"b": 2 ,"c" : 3}`, `{"":""}`, `{"a":"01234567"}`,
	`{"a":"0123456\"7"}`, `{"a":"0123456789abcdef\\"}`, `{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9}`,
	`{"a":[1,2` + "\x00", `{"a":tru` + "e}", `{"a":1} `, `{"a":1}]`, `{"a":1}}`, `{]`, `{"a"}`, `{"a":"é",  "b":"☃"}`,
}

// TestScanObjectMatchesPrev: the scanner accepts what the previous one
// accepted, and records the same index.
func TestScanObjectMatchesPrev(t *testing.T) {
	cases := append(append([]string{}, validSeeds...), prevSeeds...)
	cases = append(cases, strings.Repeat(`{"a":[`, 500)+`1`+strings.Repeat(`]}`, 500))
	cases = append(cases, strings.Repeat(`[`, 100))
	cases = append(cases, `{"a":`+strings.Repeat(`[`, 10000)+strings.Repeat(`]`, 10000)+`}`)
	cases = append(cases, `{"a":`+strings.Repeat(`[`, 9999)+strings.Repeat(`]`, 9999)+`}`)
	cases = append(cases, string(benchItem), string(smallItem))
	for _, c := range cases {
		checkSamePrev(t, []byte(c))
	}
}

func checkSamePrev(t *testing.T, b []byte) {
	t.Helper()
	var got, want index
	g, w := scanObject(b, &got), scanObjectPrev(b, &want)
	got.tc, got.fl = 0, 0 // the names noted for TypeCallRole: checkTypeCallRole checks them
	if g != w || (g && got != want) {
		t.Fatalf("scanObject(%.80q) = %v %+v, previous scanner %v %+v", b, g, got, w, want)
	}
}

// FuzzScanObjectPrev is FuzzValidObject against the previous scanner,
// index included.
func FuzzScanObjectPrev(f *testing.F) {
	for _, s := range append(append([]string{}, validSeeds...), prevSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSamePrev(t, b) })
}

// BenchmarkScanPrev compares the scanner with the previous one, on the
// read benchmarks' small item, the 300-byte message and a 64 KB output.
func BenchmarkScanPrev(b *testing.B) {
	large := []byte(`{"type":"function_call_output","output":"` + strings.Repeat("0123456789abcdef", 4096) + `","call_id":"call_1"}`)
	spaced := []byte(`{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in Paris?"}]}`)
	for _, c := range []struct {
		name string
		in   []byte
	}{{"90B", smallItem}, {"py110B", spaced}, {"300B", benchItem}, {"64KB", large}} {
		var ix index
		b.Run(c.name+"/prev", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				if !scanObjectPrev(c.in, &ix) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(c.name+"/new", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				if !scanObject(c.in, &ix) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// BenchmarkScanPrevInterleaved runs the two scanners in alternating blocks
// of 256 scans (so that load on the machine falls on both alike) and
// reports each one's ns/byte and the ratio new/prev.
func BenchmarkScanPrevInterleaved(b *testing.B) {
	large := []byte(`{"type":"function_call_output","output":"` + strings.Repeat("0123456789abcdef", 4096) + `","call_id":"call_1"}`)
	spaced := []byte(`{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in Paris?"}]}`)
	for _, c := range []struct {
		name string
		in   []byte
	}{{"90B", smallItem}, {"py110B", spaced}, {"300B", benchItem}, {"64KB", large}} {
		b.Run(c.name, func(b *testing.B) {
			var ix index
			block := max(1, 256*300/len(c.in))
			var tp, tn []time.Duration
			for b.Loop() {
				t0 := time.Now()
				for range block {
					scanObjectPrev(c.in, &ix)
				}
				t1 := time.Now()
				for range block {
					scanObject(c.in, &ix)
				}
				tp, tn = append(tp, t1.Sub(t0)), append(tn, time.Since(t1))
			}
			slices.Sort(tp)
			slices.Sort(tn)
			p, n := tp[len(tp)/2], tn[len(tn)/2]
			per := float64(block * len(c.in))
			b.ReportMetric(float64(p.Nanoseconds())/per, "prev-ns/B")
			b.ReportMetric(float64(n.Nanoseconds())/per, "new-ns/B")
			b.ReportMetric(float64(n)/float64(p), "new/prev")
		})
	}
}
