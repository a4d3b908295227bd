package runstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
)

var errNotObject = errors.New("not a JSON object")

// members parses one JSON object into its members, in order. A repeated key
// keeps its first position and takes its last value, as a Python dict does.
// Values are compacted copies. The non-finite tokens Python's json module
// reads and writes (NaN, Infinity, -Infinity) are values like any other:
// encoding/json parses a copy where each is a number of the same length,
// and the values are cut from raw itself.
func members(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(finiteCopy(raw)))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var out []member
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		value := compactJSON(bytes.TrimLeft(raw[start:dec.InputOffset()], " \t\r\n:"))
		if i, seen := index[key]; seen {
			out[i].Value = value
			continue
		}
		index[key] = len(out)
		out = append(out, member{Key: key, Value: value})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return out, nil
}

// finiteCopy returns raw with each NaN, Infinity and -Infinity token
// outside strings replaced by a number of the same length, so that
// encoding/json parses it and its offsets are raw's.
func finiteCopy(raw []byte) []byte {
	var out []byte
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == 'N' || c == 'I' || c == '-' && i+1 < len(raw) && raw[i+1] == 'I':
			for _, r := range [...][2]string{{"NaN", "0e0"}, {"Infinity", "1e000000"}, {"-Infinity", "-1e000000"}} {
				if bytes.HasPrefix(raw[i:], []byte(r[0])) {
					if out == nil {
						out = bytes.Clone(raw)
					}
					copy(out[i:], r[1])
					i += len(r[0]) - 1
					break
				}
			}
		}
	}
	if out == nil {
		return raw
	}
	return out
}

// compactJSON returns a copy of the JSON value v without the whitespace
// outside its strings.
func compactJSON(v []byte) []byte {
	out := make([]byte, 0, len(v))
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString:
			if c == '\\' && i+1 < len(v) {
				out = append(out, c)
				i++
				c = v[i]
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			continue
		}
		out = append(out, c)
	}
	return out
}

// encodeObject writes members as one compact JSON object.
func encodeObject(ms []member) []byte {
	n := 2
	for _, m := range ms {
		n += len(m.Key) + len(m.Value) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, m.Key)
		b = append(b, ':')
		b = append(b, m.Value...)
	}
	return append(b, '}')
}

// appendString appends s encoded as a JSON string (as encodeString) to b.
func appendString(b []byte, s string) []byte {
	if !plainString(s) {
		return append(b, encodeString(s)...)
	}
	return append(append(append(b, '"'), s...), '"')
}

// plainString reports whether s is printable ASCII without a quote or a
// backslash: it encodes as it is, between quotes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// encodeString encodes s as a JSON string without HTML escaping.
func encodeString(s string) []byte {
	if plainString(s) {
		b := make([]byte, 0, len(s)+2)
		return append(append(append(b, '"'), s...), '"')
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}

// mustJSON encodes v, which the caller knows is encodable.
func mustJSON(v any) json.RawMessage {
	if raws, ok := v.([]json.RawMessage); ok {
		// Joined as they are: json.Marshal would refuse the NaN and
		// Infinity tokens a Python-written value may hold.
		return encodeArray(raws)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// encodeArray writes raws as one JSON array.
func encodeArray(raws []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range raws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r)
	}
	b.WriteByte(']')
	return b.Bytes()
}

func lookup(ms []member, key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// setMember replaces key's value or appends the member.
func setMember(ms []member, key string, v json.RawMessage) []member {
	for i := range ms {
		if ms[i].Key == key {
			ms[i].Value = v
			return ms
		}
	}
	return append(ms, member{Key: key, Value: v})
}

func deleteMember(ms []member, key string) []member {
	i := slices.IndexFunc(ms, func(m member) bool { return m.Key == key })
	if i < 0 {
		return ms // mostly: nothing is written when there is nothing to delete
	}
	out := ms[:i]
	for _, m := range ms[i+1:] {
		if m.Key != key {
			out = append(out, m)
		}
	}
	return out
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// jsonKind returns the first byte class of a compact JSON value: '{', '[',
// '"', 't'/'f' (booleans), 'n' (null) or '0' (numbers).
func jsonKind(v json.RawMessage) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	default:
		return '0'
	}
}

// jsonInt parses a JSON number that is a Python int (no fraction, no
// exponent) and fits an int.
func jsonInt(v json.RawMessage) (int, bool) {
	if jsonKind(v) != '0' || bytes.ContainsAny(v, ".eE") {
		return 0, false
	}
	var n int
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, false
	}
	return n, true
}

func jsonBool(v json.RawMessage) (bool, bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func jsonString(v json.RawMessage) (string, bool) {
	if jsonKind(v) != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// jsonArray splits a JSON array into its compact elements.
func jsonArray(v json.RawMessage) ([]json.RawMessage, bool) {
	if jsonKind(v) != '[' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(finiteCopy(v)))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var out []json.RawMessage
	for dec.More() {
		start := dec.InputOffset()
		var e json.RawMessage
		if err := dec.Decode(&e); err != nil {
			return nil, false
		}
		out = append(out, json.RawMessage(bytes.TrimLeft(v[start:dec.InputOffset()], " \t\r\n,")))
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	return out, true
}
