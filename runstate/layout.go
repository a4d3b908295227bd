package runstate

import (
	"bytes"

	"github.com/agentsessions/sessions/internal/pyjson"
)

// pythonLayout re-encodes one JSON value exactly as Python's
// json.dumps(value, indent=2, sort_keys=True) followed by a newline, the
// layout of the Python SDK's checkpoint fixtures.
func pythonLayout(raw []byte) ([]byte, error) {
	compact, err := pyjson.Dumps(raw, pyjson.Options{SortKeys: true, EnsureASCII: true, Compact: true})
	if err != nil {
		return nil, err
	}
	return indent(compact), nil
}

// indent lays out pyjson's compact output with two-space indentation,
// "," item separators at line ends and ": " key separators, empty
// containers kept as {} and [].
func indent(c []byte) []byte {
	out := bytes.NewBuffer(make([]byte, 0, len(c)*2))
	depth := 0
	newline := func() {
		out.WriteByte('\n')
		for range depth {
			out.WriteString("  ")
		}
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		switch ch {
		case '"':
			j := i + 1
			for c[j] != '"' {
				if c[j] == '\\' {
					j++
				}
				j++
			}
			out.Write(c[i : j+1])
			i = j
		case '{', '[':
			if i+1 < len(c) && (c[i+1] == '}' || c[i+1] == ']') {
				out.WriteByte(ch)
				out.WriteByte(c[i+1])
				i++
				continue
			}
			out.WriteByte(ch)
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			out.WriteByte(ch)
		case ',':
			out.WriteByte(',')
			newline()
		case ':':
			out.WriteString(": ")
		default:
			out.WriteByte(ch)
		}
	}
	out.WriteByte('\n')
	return out.Bytes()
}
