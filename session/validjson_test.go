package session

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference is the definition validObject must match: encoding/json's
// validity, valid UTF-8, and an object at the top.
func reference(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return json.Valid(b) && utf8.Valid(b) && len(t) > 0 && t[0] == '{'
}

var validSeeds = []string{
	`{}`, ` {"a":1} `, `{"a":[1,2,{"b":null}],"c":true,"d":false,"e":-0.5e+10}`,
	`{"s":"\u00e9\ud83d\ude00\n\t\"\\\/"}`, `{"é":"☃😀"}`, `{"a":{}}`, `{"a":[]}`, `{"a":[[],[{}]]}`,
	`{"n":0}`, `{"n":-0}`, `{"n":1E5}`, `{"n":1.0e-7}`, "{\"a\":1}\n",
	`{"a":1`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{a:1}`, `[1]`, `"s"`, `1`, `null`, ``, ` `,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":nul}`, `{"a":"\x"}`,
	`{"a":"\u12"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\xed\xa0\x80\"}", `{"a":1}{}`,
	`{"a":1} x`, `{"a":[1}`, `{"a":{]}`, `{"a":[1,]}`, `{"a":NaN}`, `{"a":Infinity}`, `{"a":"x"]`,
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

func BenchmarkValidReference(b *testing.B) {
	b.SetBytes(int64(len(benchItem)))
	for b.Loop() {
		if !reference(benchItem) {
			b.Fatal("invalid")
		}
	}
}
