package session

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// reference is the definition validObject must match: encoding/json's
// validity once the NaN, Infinity and -Infinity tokens Python's json.loads
// reads are replaced by null (outside strings: a token glued to anything,
// such as -NaN or NaN1, stays invalid), valid UTF-8, and an object at the
// top.
func reference(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return json.Valid(referenceTokens(b)) && utf8.Valid(b) && len(t) > 0 && t[0] == '{'
}

// referenceTokens replaces the Python tokens outside strings by null. It
// is written independently of neutralTokens, with a regular expression
// over the text between strings.
func referenceTokens(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		q := bytes.IndexByte(b, '"')
		if q < 0 {
			return append(out, tokenRE.ReplaceAll(b, []byte("null"))...)
		}
		out = append(out, tokenRE.ReplaceAll(b[:q], []byte("null"))...)
		// Copy the string, up to its closing quote.
		end := q + 1
		for end < len(b) && b[end] != '"' {
			if b[end] == '\\' {
				end++
			}
			end++
		}
		end = min(end+1, len(b))
		out = append(out, b[q:end]...)
		b = b[end:]
	}
	return out
}

var tokenRE = regexp.MustCompile(`-Infinity|Infinity|NaN`)

var validSeeds = []string{
	`{}`, ` {"a":1} `, `{"a":[1,2,{"b":null}],"c":true,"d":false,"e":-0.5e+10}`,
	`{"s":"\u00e9\ud83d\ude00\n\t\"\\\/"}`, `{"é":"☃😀"}`, `{"a":{}}`, `{"a":[]}`, `{"a":[[],[{}]]}`,
	`{"n":0}`, `{"n":-0}`, `{"n":1E5}`, `{"n":1.0e-7}`, "{\"a\":1}\n",
	`{"a":1`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{a:1}`, `[1]`, `"s"`, `1`, `null`, ``, ` `,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":nul}`, `{"a":"\x"}`,
	`{"a":"\u12"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\xed\xa0\x80\"}", `{"a":1}{}`,
	`{"a":1} x`, `{"a":[1}`, `{"a":{]}`, `{"a":[1,]}`, `{"a":NaN}`, `{"a":Infinity}`, `{"a":"x"]`,
	`{"a":-Infinity}`, `{"a":[NaN,Infinity,-Infinity]}`, `{"a":-NaN}`, `{"a":+Infinity}`, `{"a":nan}`,
	`{"a":NaN1}`, `{"a":Infinityx}`, `{"a":-Infinity1}`, `{"a":--Infinity}`, `{"a":-Inf}`, `{"a":infinity}`,
	`{"a":NaNN}`, `{"a":Na}`, `{"a":Infinit}`, `{"a":-}`, `{NaN:1}`, `{"NaN":NaN}`, `{"a":"NaN"}`, `NaN`,
	`{"a":1}NaN`, `{"a": NaN }`, `{"a":[1,NaN ,2]}`, `{"a":{"b":-Infinity}}`, `{"a":1e5NaN}`,
	"{\"\xc3\xa9\":1}", "{\"a\":1}\x00", `{"a":"\uD800"}`, `{"a":1.5e+}`, `{"a":[true,false,null]}`,
}

func TestValidObjectMatchesReference(t *testing.T) {
	cases := append([]string{}, validSeeds...)
	cases = append(cases, strings.Repeat(`{"a":[`, 500)+`1`+strings.Repeat(`]}`, 500))
	cases = append(cases, strings.Repeat(`{"a":`, 10001)+`1`+strings.Repeat(`}`, 10001))
	for _, c := range cases {
		if got, want := validObject([]byte(c)), reference([]byte(c)); got != want {
			t.Errorf("validObject(%.60q) = %v, want %v", c, got, want)
		}
	}
}

func FuzzValidObject(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validObject(b), reference(b); got != want {
			t.Fatalf("validObject(%q) = %v, reference %v", b, got, want)
		}
	})
}

var benchItem = []byte(`{"type":"message","role":"assistant","id":"msg_0123456789","content":[{"type":"output_text","text":"` +
	strings.Repeat("The weather in Paris is clear, 18°C. ", 8) + `","annotations":[]}],"status":"completed"}`)

func BenchmarkValidObject(b *testing.B) {
	b.SetBytes(int64(len(benchItem)))
	for b.Loop() {
		if !validObject(benchItem) {
			b.Fatal("invalid")
		}
	}
}

// smallItem is the ~90-byte message the adapters' read benchmarks store.
var smallItem = []byte(`{"type":"message","role":"user","content":"123 0000000000000000000000000000000000000000"}`)

func BenchmarkValidObjectSmall(b *testing.B) {
	b.SetBytes(int64(len(smallItem)))
	for b.Loop() {
		if !validObject(smallItem) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkValidReference(b *testing.B) {
	b.SetBytes(int64(len(benchItem)))
	for b.Loop() {
		if !reference(benchItem) {
			b.Fatal("invalid")
		}
	}
}

// TestPythonTokensAsCPython pins the token spellings to what CPython 3.11's
// json.loads accepts (checked with python3 -c 'import json; json.loads(s)').
func TestPythonTokensAsCPython(t *testing.T) {
	accepted := []string{`{"a":NaN}`, `{"a":Infinity}`, `{"a":-Infinity}`, `{"a":[NaN,1]}`, `{"a": NaN }`}
	rejected := []string{`{"a":-NaN}`, `{"a":+Infinity}`, `{"a":nan}`, `{"a":NaN1}`, `{"a":Infinityx}`,
		`{"a":-Infinity1}`, `{"a":--Infinity}`, `{"a":-Inf}`, `{"a":infinity}`}
	for _, s := range accepted {
		if !validObject([]byte(s)) {
			t.Errorf("rejected %s, which json.loads reads", s)
		}
		if err := invalidReasonOrNil(s); err != nil {
			t.Errorf("ParseItem(%s): %v", s, err)
		}
	}
	for _, s := range rejected {
		if validObject([]byte(s)) {
			t.Errorf("accepted %s, which json.loads refuses", s)
		}
		if err := invalidReasonOrNil(s); err == nil || !strings.HasSuffix(err.Error(), ": invalid JSON") {
			t.Errorf("ParseItem(%s): %v, want invalid JSON", s, err)
		}
	}
	// The reason for a rejection takes the tokens into account.
	for s, want := range map[string]string{
		"{\"a\":NaN,\"b\":\"\xff\"}": "invalid UTF-8",
		`[NaN]`:                      "not an object",
		`{"a":NaN`:                   "invalid JSON",
	} {
		if err := invalidReasonOrNil(s); err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("ParseItem(%q): %v, want %s", s, err, want)
		}
	}
}

func invalidReasonOrNil(s string) error {
	_, err := ParseItem(s)
	return err
}

// TestValidStringEveryPosition puts each kind of special byte at every
// position of strings around the eight-byte fast path's width.
func TestValidStringEveryPosition(t *testing.T) {
	specials := []string{`"`, `\`, `\n`, `\u00e9`, "\x00", "\x1f", "\x20", "\x7f", "\x80", "\xc3\xa9", "\xe2\x98", "\xff", "!", "#", "[", "\\\"", "~"}
	for n := 0; n < 26; n++ {
		for pos := 0; pos <= n; pos++ {
			for _, sp := range specials {
				body := strings.Repeat("a", pos) + sp + strings.Repeat("b", n-pos)
				in := []byte(`{"k":"` + body + `","z":1}`)
				if got, want := validObject(in), reference(in); got != want {
					t.Fatalf("validObject(%q) = %v, want %v", in, got, want)
				}
			}
		}
	}
}

// TestItemBookkeepingSize: an Item's bookkeeping (its bytes' slice header
// and the member index) fits one 64-byte allocation, the size class that
// reads allocate once per item.
func TestItemBookkeepingSize(t *testing.T) {
	if n := unsafe.Sizeof(itemData{}); n > 64 {
		t.Errorf("itemData is %d bytes, want at most 64", n)
	}
}
