package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// referenceFields decodes the top-level members of a valid item with
// encoding/json (after replacing the Python tokens, which it cannot read):
// each key, unescaped, with its last value, neutralised the same way.
func referenceFields(t testing.TB, b []byte) map[string]string {
	dec := json.NewDecoder(bytes.NewReader(referenceTokens(b)))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("reference: %v", err)
	}
	out := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("reference: %v", err)
		}
		out[tok.(string)] = string(v)
	}
	return out
}

// checkFields compares every accessor of the item holding b with the
// reference, for every key the item has and a few it has not.
func checkFields(t testing.TB, b []byte) {
	it, err := NewItem(b)
	if err != nil {
		return
	}
	want := referenceFields(t, b)
	keys := []string{"", "missing", "type", "id", "TYPE"}
	for k := range want {
		keys = append(keys, k)
	}
	for _, k := range keys {
		v, ok := it.Field(k)
		w, wok := want[k]
		if ok != wok || (ok && string(referenceTokens(v)) != w) {
			t.Fatalf("Field(%q) of %q = %q %v, want %q %v", k, b, v, ok, w, wok)
		}
		if it.HasField(k) != wok {
			t.Fatalf("HasField(%q) of %q = %v", k, b, !wok)
		}
		s, sok := it.StringField(k)
		var ws string
		wsok := wok && strings.HasPrefix(w, `"`) && json.Unmarshal([]byte(w), &ws) == nil
		if sok != wsok || s != ws {
			t.Fatalf("StringField(%q) of %q = %q %v, want %q %v", k, b, s, sok, ws, wsok)
		}
	}
}

var fieldSeeds = []string{
	`{}`, ` { } `, `{"type":"function_call","call_id":"c","id":"x"}`,
	`{"Type":"upper","type":"function_call","call_id":"c","id":5,"call_id":"c2"}`,
	" {\n\t\"type\" :\r \"message\" ,\n \"role\"\t:\"user\" , \"content\" : [ 1 , {\"type\":\"inner\"} ] \n} ",
	`{"a":NaN,"type":"x","b":-Infinity,"c":Infinity,"id":"after-nan"}`,
	`{"\u0074ype":"escaped key","id":"\u00e9\ud83d\ude00\n\"q\"","call_id":"\ud800 lone","k\\":"backslash key"}`,
	`{"a\"":1,"a":2,"a\\":3}`,
	`{"m0":0,"m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8,"type":"ninth and later","m0":"dup past inline","id":"x"}`,
	`{"type":"first","m1":{"a":[1,2,{"b":"}]"}]},"m2":"x\\","m3":[],"m4":{},"m5":null,"m6":true,"m7":false,"m8":-1.5e3,"m9":"]}","type":"last"}`,
	`{"o":{"type":"nested, not top-level"},"t":"x"}`,
}

func TestItemFieldsMatchReference(t *testing.T) {
	for _, s := range fieldSeeds {
		checkFields(t, []byte(s))
	}
	// A wide object with duplicates both inside and past the inline index.
	var b strings.Builder
	b.WriteString(`{`)
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d" : "v%d" , `, i%13, i)
	}
	b.WriteString(`"end":NaN}`)
	checkFields(t, []byte(b.String()))
}

func TestItemFieldsUnescape(t *testing.T) {
	it := MustItem(`{"\u0074ype":"function_call","id":"caf\u00e9 \ud83d\ude00","role":"a\ud800b\udc00\ud800\ud800\udc00","n":NaN}`)
	if it.Type() != "function_call" {
		t.Errorf("Type() = %q: an escaped key matches", it.Type())
	}
	if it.ID() != "café 😀" {
		t.Errorf("ID() = %q", it.ID())
	}
	if it.Role() != "a\uFFFDb\uFFFD\uFFFD\U00010000" {
		t.Errorf("Role() = %q: unpaired surrogates become U+FFFD as encoding/json decodes them", it.Role())
	}
	if v, _ := it.Field("n"); string(v) != "NaN" {
		t.Errorf(`Field("n") = %q`, v)
	}
}

func FuzzItemFields(f *testing.F) {
	for _, s := range fieldSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFields(t, b)
	})
}

// checkTypeCallRole compares TypeCallRole of the item holding b with
// Type, CallID and HasField("role"), and with encoding/json's reading, on
// the names scanObject noted and on the walk over all of them.
func checkTypeCallRole(t testing.TB, b []byte) {
	it, err := NewItem(b)
	if err != nil {
		return
	}
	typ, callID, role := it.TypeCallRole()
	if typ != it.Type() || callID != it.CallID() || role != it.HasField("role") {
		t.Fatalf("TypeCallRole of %q = %q %q %v, want %q %q %v", b, typ, callID, role, it.Type(), it.CallID(), it.HasField("role"))
	}
	ref := referenceFields(t, b)
	str := func(k string) string {
		var s string
		_ = json.Unmarshal([]byte(ref[k]), &s)
		return s
	}
	_, hasRole := ref["role"]
	if typ != str("type") || callID != str("call_id") || role != hasRole {
		t.Fatalf("TypeCallRole of %q = %q %q %v, encoding/json reads %q %q %v", b, typ, callID, role, str("type"), str("call_id"), hasRole)
	}
	if wt, wc, wr := it.d.walkNames(); wt != typ || wc != callID || wr != role {
		t.Fatalf("walkNames of %q = %q %q %v, TypeCallRole %q %q %v", b, wt, wc, wr, typ, callID, role)
	}
}

// typeCallRoleSeeds are fieldSeeds and the items that tell the names
// scanObject notes from the walk over the members: repeated, escaped and
// near-miss names, and names past the inline index.
func typeCallRoleSeeds() []string {
	return append(slices.Clone(fieldSeeds),
		`{"type":"t","call_id":"c","role":"r","type":7,"call_id":null}`,
		`{"\u0072ole":1,"\u0063all_id":"esc","typ\u0065":"e","call_idx":"no","rolex":2,"t":3}`,
		`{"call_id":"c1","m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"type":"past the index","ca\u006cl_id":"c2","role":null}`,
		`{"m0":0,"m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7}`,
		`{"m0":0,"m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"m7":7,"m8":8}`,
		`{"type" : "spaced" , "call_id" : "c" }`,
		`{"ty\u0070e":"esc","call_\u0069d":"e2","\u0072\u006fle":1,"argument\u0073":"x"}`,
		`{"type":"plain","t\u0079pe":"escaped last"}`,
		`{"t\u0079pe":"escaped first","type":"plain last","call_id":1,"call_id":"c"}`,
		`{"call_id":"before","role":null,"type":"after"}`,
		`{"typ":"x","types":"y","call_i":"z","call_idd":"w","rol":1,"roles":2,"\"type":3}`,
		`{"m0":0,"m1":1,"m2":2,"m3":3,"m4":4,"m5":5,"m6":6,"type":"eighth","role":"ninth"}`)
}

func TestTypeCallRoleMatchesFields(t *testing.T) {
	for _, s := range typeCallRoleSeeds() {
		checkTypeCallRole(t, []byte(s))
	}
	var zero Item
	if typ, callID, role := zero.TypeCallRole(); typ != "" || callID != "" || role {
		t.Errorf("TypeCallRole of the zero Item = %q %q %v", typ, callID, role)
	}
}

func FuzzTypeCallRole(f *testing.F) {
	for _, s := range typeCallRoleSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkTypeCallRole(t, b)
	})
}
