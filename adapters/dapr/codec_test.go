package dapr

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/agentsessions/sessions/session"
)

// FuzzDecodeMessages feeds stored values (written by anyone: a foreign
// writer, a damaged store) to the decoder of the messages key. It must
// never panic; a value it accepts re-encodes to an array it decodes the
// same; each element is an item or a corrupt record; and an item written
// back as an element reads back byte for byte.
func FuzzDecodeMessages(f *testing.F) {
	for _, seed := range []string{
		``, `[]`, ` [ ] `, `["{\"a\":1}"]`, `[{"a":1}]`, `["not json",1,null,[1],"{}"]`,
		`["{\"s\":\"\\u00e9\\ud83d\\ude00\"}"]`, `["\ud800"]`, `["\ufffd{}"]`, `{"a":1}`, `"[]"`, `[`, "[\"\xff\"]",
		`["{\"a\":NaN}"]`, `[NaN]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		elems, err := decodeMessages(data)
		if err != nil {
			if !errors.Is(err, session.ErrCorruptRecord) {
				t.Fatalf("a refused value's error does not wrap ErrCorruptRecord: %v", err)
			}
			return
		}
		again, err := encodeMessages(elems, nil)
		if err != nil {
			t.Fatalf("encode accepted elements: %v", err)
		}
		elems2, err := decodeMessages(again)
		if err != nil || len(elems2) != len(elems) {
			t.Fatalf("re-encoded %q does not decode the same: %v", again, err)
		}
		for i, e := range elems {
			if !bytes.Equal(e, elems2[i]) {
				t.Fatalf("element %d changed: %q -> %q", i, e, elems2[i])
			}
			it, err := decodeElement(e)
			if err != nil {
				if !errors.Is(err, session.ErrCorruptRecord) {
					t.Fatalf("element %q: error does not wrap ErrCorruptRecord: %v", e, err)
				}
				if rec := recordText(e); len(rec) == 0 && len(e) > 2 {
					t.Fatalf("element %q reported without its bytes", e)
				}
				continue
			}
			written, err := encodeMessages(nil, [][]byte{it.Bytes()})
			if err != nil {
				t.Fatalf("item %q cannot be written: %v", it.Bytes(), err)
			}
			back, err := decodeMessages(written)
			if err != nil || len(back) != 1 {
				t.Fatalf("written %q does not decode: %v", written, err)
			}
			it2, err := decodeElement(back[0])
			if err != nil || !bytes.Equal(it2.Bytes(), it.Bytes()) {
				t.Fatalf("item %q read back as %q (%v)", it.Bytes(), it2.Bytes(), err)
			}
			if !utf8.Valid(written) || bytes.ContainsFunc(written, func(r rune) bool { return r > 0x7e }) {
				t.Fatalf("written element %q is not ASCII, as Python's ensure_ascii writes it", written)
			}
		}
	})
}

func TestEncodeMetadata(t *testing.T) {
	got, err := encodeMetadata("s\u00e9 \U0001F600 \"q\"", 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"session_id": "s\u00e9 \ud83d\ude00 \"q\"", "created_at": "1700000000", "updated_at": "1700000000"}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var v map[string]string
	if err := json.Unmarshal(got, &v); err != nil || v["session_id"] != "s\u00e9 \U0001F600 \"q\"" {
		t.Fatalf("metadata does not read back: %v %v", v, err)
	}
}

func TestMayHoldOwnWrite(t *testing.T) {
	for _, c := range []struct {
		name              string
		data, read, tried string
		want              bool
	}{
		{"append landed", `[a,x]`, `[a]`, `[a,x]`, true},
		{"append landed, more after", `[a,x,y]`, `[a]`, `[a,x]`, true},
		{"append lost to another", `[a,y]`, `[a]`, `[a,x]`, false},
		{"first append landed", `[x]`, ``, `[x]`, true},
		{"first append lost", `[y]`, ``, `[x]`, false},
		{"pop landed", `[a,b]`, `[a,b,c]`, `[a,b]`, true},
		{"pop landed, appended after", `[a,b,y]`, `[a,b,c]`, `[a,b]`, true},
		{"pop lost to an append", `[a,b,c,y]`, `[a,b,c]`, `[a,b]`, false},
		{"last pop landed", `[]`, `[a]`, `[]`, true},
		{"last pop landed, appended after", `[y]`, `[a]`, `[]`, true},
		{"last pop lost to an append", `[a,y]`, `[a]`, `[]`, false},
		{"replace landed", `[z]`, `[a,b]`, `[z]`, true},
		{"replace lost to an append", `[a,b,y]`, `[a,b]`, `[a]`, false},
		{"delete landed", ``, `[a]`, ``, true},
		{"delete lost to an append", `[a,y]`, `[a]`, ``, false},
	} {
		if got := mayHoldOwnWrite([]byte(c.data), []byte(c.read), []byte(c.tried)); got != c.want {
			t.Errorf("%s: mayHoldOwnWrite(%s, read %s, tried %s) = %v, want %v", c.name, c.data, c.read, c.tried, got, c.want)
		}
	}
}
