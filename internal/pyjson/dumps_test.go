package pyjson

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var pythonDefault = Options{SortKeys: true, EnsureASCII: true}

func TestDumpsSeparators(t *testing.T) {
	in := []byte(`{"a":[1,{"b":null}],"c":{}}`)
	out, err := Dumps(in, Options{})
	require.NoError(t, err)
	assert.Equal(t, `{"a": [1, {"b": null}], "c": {}}`, string(out))
	out, err = Dumps(in, Options{Compact: true})
	require.NoError(t, err)
	assert.Equal(t, `{"a":[1,{"b":null}],"c":{}}`, string(out))
}

func TestDumpsDuplicateKeysKeepFirstPositionLastValue(t *testing.T) {
	// Verified with CPython: json.dumps(json.loads(...)) == '{"a": 3, "b": 2}'.
	out, err := Dumps([]byte(`{"a":1,"b":2,"a":3}`), Options{})
	require.NoError(t, err)
	assert.Equal(t, `{"a": 3, "b": 2}`, string(out))

	// More members than smallObject takes the sorted-copy path.
	in := `{"k9":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k1":10,"k9":90,"k1":100}`
	out, err = Dumps([]byte(in), Options{Compact: true})
	require.NoError(t, err)
	assert.Equal(t, `{"k9":90,"k1":100,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8}`, string(out))
	out, err = Dumps([]byte(in), Options{Compact: true, SortKeys: true})
	require.NoError(t, err)
	assert.Equal(t, `{"k1":100,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":90}`, string(out))
}

func TestDumpsDropTopLevelOnly(t *testing.T) {
	in := []byte(`{"id":"x","a":{"id":"nested"},"_agents_tool_title":"t","\u0069d":"y"}`)
	out, err := Dumps(in, Options{SortKeys: true, DropTopLevel: []string{"id", "_agents_tool_title"}})
	require.NoError(t, err)
	assert.Equal(t, `{"a": {"id": "nested"}}`, string(out))
	out, err = Dumps([]byte(`[{"id":1}]`), Options{DropTopLevel: []string{"id"}})
	require.NoError(t, err)
	assert.Equal(t, `[{"id": 1}]`, string(out))
	out, err = Dumps([]byte(`{"id":1}`), Options{DropTopLevel: []string{"id"}})
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(out))
}

func TestDumpsStrings(t *testing.T) {
	in := []byte(`"\" \\ \/ \b\f\n\r\t \u0001 \u007f é \ud83d\ude00 😀 \ud800"`)
	out, err := Dumps(in, Options{EnsureASCII: true})
	require.NoError(t, err)
	assert.Equal(t, `"\" \\ / \b\f\n\r\t \u0001 \u007f \u00e9 \ud83d\ude00 \ud83d\ude00 \ud800"`, string(out))
	out, err = Dumps(in, Options{})
	require.NoError(t, err)
	assert.Equal(t, "\"\\\" \\\\ / \\b\\f\\n\\r\\t \\u0001 \x7f é 😀 😀 \\ud800\"", string(out))
}

func TestDumpsSortKeysUsesCodePointOrder(t *testing.T) {
	// UTF-16 order would put U+10000 (a surrogate pair) before U+FFFF.
	in := []byte(`{"\uffff":1,"𐀀":2,"\ue000":3,"\ud800":4,"a":5}`)
	out, err := Dumps(in, Options{SortKeys: true, EnsureASCII: true, Compact: true})
	require.NoError(t, err)
	assert.Equal(t, `{"a":5,"\ud800":4,"\ue000":3,"\uffff":1,"\ud800\udc00":2}`, string(out))
}

func TestDumpsNumbers(t *testing.T) {
	cases := map[string]string{
		"-0":                     "0",
		"12345678901234567890":   "12345678901234567890",
		"1.0":                    "1.0",
		"-0.0":                   "-0.0",
		"1e2":                    "100.0",
		"1e16":                   "1e+16",
		"1e15":                   "1000000000000000.0",
		"1.5e-7":                 "1.5e-07",
		"0.0001":                 "0.0001",
		"0.00001":                "1e-05",
		"5e-324":                 "5e-324",
		"1.7976931348623157e308": "1.7976931348623157e+308",
		"0.30000000000000004":    "0.30000000000000004",
		"1e22":                   "1e+22",
		"123456789012345678.0":   "1.2345678901234568e+17",
		"1e400":                  "Infinity",
		"-1e400":                 "-Infinity",
		"-1e-400":                "-0.0",
	}
	for in, want := range cases {
		out, err := Dumps([]byte(in), Options{})
		require.NoError(t, err, in)
		assert.Equal(t, want, string(out), in)
	}
	assert.Equal(t, "NaN", string(appendFloat(nil, math.NaN())))
}

func TestDumpsIntDigitLimit(t *testing.T) {
	_, err := Dumps([]byte(strings.Repeat("9", maxIntDigits)), Options{})
	require.NoError(t, err)
	_, err = Dumps([]byte("-"+strings.Repeat("9", maxIntDigits+1)), Options{})
	require.ErrorIs(t, err, ErrInvalidJSON)
	assert.Contains(t, err.Error(), "4300")
}

func TestDumpsDepth(t *testing.T) {
	nest := func(depth int, open, close, inner string) []byte {
		return []byte(strings.Repeat(open, depth) + inner + strings.Repeat(close, depth))
	}
	out, err := Dumps(nest(maxDepth, "[", "]", ""), Options{Compact: true})
	require.NoError(t, err)
	assert.Equal(t, 2*maxDepth, len(out))
	out, err = Dumps(nest(maxDepth, `{"a":`, "}", "1"), Options{SortKeys: true})
	require.NoError(t, err)
	assert.Equal(t, 7*maxDepth+1, len(out)) // {"a": ... }

	_, err = Dumps(nest(maxDepth+1, "[", "]", ""), Options{})
	require.ErrorIs(t, err, ErrInvalidJSON)
	_, err = Dumps(nest(maxDepth+1, `{"a":`, "}", "1"), Options{})
	require.ErrorIs(t, err, ErrInvalidJSON)
	// Hostile, unterminated input far deeper than the cap.
	_, err = Dumps([]byte(strings.Repeat("[", 5_000_000)), Options{})
	require.ErrorIs(t, err, ErrInvalidJSON)
}

func TestDumpsInvalid(t *testing.T) {
	for _, in := range []string{"", "   ", "nan", "-NaN", "+Infinity", "[Infinityx]", "NaN1", "{\"a\":1,}", "007", "[1] x", "\"\xff\"", "\"\t\""} {
		out, err := Dumps([]byte(in), Options{})
		assert.ErrorIs(t, err, ErrInvalidJSON, "%q", in)
		assert.Nil(t, out, "%q", in)
	}
	_, err := Dumps(nil, pythonDefault)
	assert.ErrorIs(t, err, ErrInvalidJSON)
}

// TestDumpsNonFiniteTokens: json.loads reads NaN, Infinity and -Infinity
// and json.dumps writes them back as such (allow_nan=True), so a Python
// store holding them round-trips and digests as in Python.
func TestDumpsNonFiniteTokens(t *testing.T) {
	for in, want := range map[string]string{
		`{"x": NaN}`:                           `{"x": NaN}`,
		`{"y": -Infinity}`:                     `{"y": -Infinity}`,
		`{"b":Infinity,"a":[NaN,-Infinity,1]}`: `{"a": [NaN, -Infinity, 1], "b": Infinity}`,
	} {
		out, err := Dumps([]byte(in), pythonDefault)
		require.NoError(t, err, in)
		assert.Equal(t, want, string(out), in)
	}
}

func TestDumpsDoesNotRetainInput(t *testing.T) {
	in := []byte(`{"b":"x","a":"y"}`)
	out, err := Dumps(in, pythonDefault)
	require.NoError(t, err)
	copy(in, `{"b":"z","a":"z"}`)
	assert.Equal(t, `{"a": "y", "b": "x"}`, string(out))
}

func TestDumpsConcurrent(t *testing.T) {
	inputs := []string{
		`{"b":[1,2,{"z":"é","a":null}],"a":"\u00e9\n"}`,
		`[{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k1":10}]`,
		`{"id":"x","_agents_tool_title":"t","v":1.5e-7}`,
		`[1,2,`, // invalid: the pooled state must be reset after errors
	}
	want := make([]string, len(inputs))
	for i, in := range inputs {
		out, _ := Dumps([]byte(in), pythonDefault)
		want[i] = string(out)
	}
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 0; n < 200; n++ {
				i := (g + n) % len(inputs)
				out, _ := Dumps([]byte(inputs[i]), pythonDefault)
				if string(out) != want[i] {
					t.Errorf("input %d: got %q, want %q", i, out, want[i])
					return
				}
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}
