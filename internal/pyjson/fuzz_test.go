package pyjson

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// fuzzOptions are the option sets every fuzz input is encoded with.
var fuzzOptions = func() []Options {
	var opts []Options
	for i := 0; i < 8; i++ {
		opts = append(opts, Options{SortKeys: i&1 != 0, EnsureASCII: i&2 != 0, Compact: i&4 != 0})
	}
	return append(opts, Options{SortKeys: true, EnsureASCII: true, DropTopLevel: []string{"id", "_agents_tool_title"}})
}()

// hasRawSurrogate reports encoded surrogates (ED A0..BF) in the input. They
// decode to separate surrogate code points that the output writes as escapes,
// and a high+low pair of escapes decodes to one astral character on the next
// round, so idempotence does not hold for them (nor does it in CPython).
func hasRawSurrogate(data []byte) bool {
	for i := 0; i+1 < len(data); i++ {
		if data[i] == 0xED && data[i+1] >= 0xA0 && data[i+1] <= 0xBF {
			return true
		}
	}
	return false
}

// pythonValid is the acceptance rule Dumps must follow, written without
// the parser: encoding/json's validity once each NaN, Infinity and
// -Infinity token outside strings is replaced by null (a token glued to
// anything, -NaN or NaN1, stays invalid, as in json.loads).
func pythonValid(data []byte) bool {
	return json.Valid(neutral(data))
}

var tokenRE = regexp.MustCompile(`-Infinity|Infinity|NaN`)

// neutral replaces the tokens outside strings by null.
func neutral(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		q := bytes.IndexByte(b, '"')
		if q < 0 {
			return append(out, tokenRE.ReplaceAll(b, []byte("null"))...)
		}
		out = append(out, tokenRE.ReplaceAll(b[:q], []byte("null"))...)
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

// hasNonFinite reports NaN and infinite floats (tokens, or literals that
// overflow), which json.dumps writes as the non-standard tokens.
func hasNonFinite(data []byte) bool {
	p, err := parse(data)
	if err != nil {
		return false
	}
	for i := range p.nodes {
		if n := &p.nodes[i]; n.kind == kindFloat {
			if f := parseFloat(p.text(n)); math.IsInf(f, 0) || math.IsNaN(f) {
				return true
			}
		}
	}
	return false
}

func FuzzDumps(f *testing.F) {
	for _, seed := range []string{
		`{"role":"user","content":"hello"}`,
		`{"a":1,"b":2,"a":3}`,
		`[1.0,1e16,1.5e-7,-0,-0.0,12345678901234567890,5e-324,1e400]`,
		`"caf\u00e9 \ud83d\ude00 \ud800 é 😀 \u007f"`,
		"\xef\xbb\xbf{\"id\":1,\"x\":[[],{}]}",
		`{"x": NaN, "y": -Infinity, "z": [Infinity, -NaN]}`,
		`[NaN1, +Infinity, Infinityx, nan]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nonFinite := hasNonFinite(data)
		rawSurrogate := hasRawSurrogate(data)
		for _, opts := range fuzzOptions {
			out, err := Dumps(data, opts)
			if err != nil {
				require.ErrorIs(t, err, ErrInvalidJSON)
				require.Nil(t, out)
				if pythonValid(bytes.TrimPrefix(data, []byte(utf8BOM))) && utf8.Valid(data) {
					// The reference accepts it: only CPython's int limit
					// may reject it here.
					require.Contains(t, err.Error(), "4300-digit", "%q", data)
				}
				continue
			}
			require.True(t, pythonValid(bytes.TrimPrefix(data, []byte(utf8BOM))), "accepted invalid JSON %q", data)
			require.True(t, utf8.Valid(out), "invalid UTF-8 output %q", out)
			if opts.EnsureASCII {
				for _, c := range out {
					require.Less(t, c, byte(0x80), "non-ASCII output %q", out)
				}
			}
			if nonFinite {
				// The tokens aside, the output must be JSON.
				require.True(t, pythonValid(out), "invalid output %q for %q", out, data)
			} else {
				require.True(t, json.Valid(out), "invalid output %q for %q", out, data)
			}
			if rawSurrogate {
				continue
			}
			again, err := Dumps(out, opts)
			require.NoError(t, err, "re-encoding %q", out)
			require.Equal(t, string(out), string(again), "not idempotent for %q", data)
		}
	})
}
