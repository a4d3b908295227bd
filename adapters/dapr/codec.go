package dapr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// errNotArray reports a stored history that is not a JSON array: Python's
// DaprSession reads it as empty and refuses to rewrite it.
var errNotArray = errors.New("stored messages are not a JSON array")

// decodeMessages splits the stored value of "<id>:messages" into its
// elements, each kept byte for byte. An absent or empty value is an empty
// history. A value that is not a JSON array (invalid UTF-8, invalid JSON,
// another JSON value) gives an error wrapping errNotArray and
// session.ErrCorruptRecord.
func decodeMessages(data []byte) ([]json.RawMessage, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: %w: invalid UTF-8", session.ErrCorruptRecord, errNotArray)
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, fmt.Errorf("%w: %w", session.ErrCorruptRecord, errNotArray)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, fmt.Errorf("%w: %w: %v", session.ErrCorruptRecord, errNotArray, err)
	}
	return elems, nil
}

// decodeElement returns the item one array element holds: a JSON string
// whose text is the item's JSON (what Python's _serialize_item and this
// package write), or a JSON object stored directly, which Python's
// get_items also returns as an item. Anything else wraps
// session.ErrCorruptRecord.
func decodeElement(raw json.RawMessage) (session.Item, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return driver.DecodeStored(bytes.Clone(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return session.Item{}, fmt.Errorf("%w: %v", session.ErrCorruptRecord, err)
	}
	if lostSurrogate(raw, s) {
		return session.Item{}, fmt.Errorf("%w: a string element holds a lone surrogate, which no item can", session.ErrCorruptRecord)
	}
	return driver.DecodeStoredString(s)
}

// lostSurrogate reports whether decoding raw into s replaced a lone
// surrogate escape with U+FFFD (encoding/json does so silently), which
// would change the record's text.
func lostSurrogate(raw json.RawMessage, s string) bool {
	if !bytes.ContainsRune([]byte(s), utf8.RuneError) {
		return false
	}
	lower := bytes.ToLower(raw)
	return !bytes.Contains(lower, []byte(`\ufffd`)) && !bytes.ContainsRune(raw, utf8.RuneError)
}

// recordText returns what a report about element raw holds: the text of a
// string element (the record, as a writer stored it), else its bytes.
func recordText(raw json.RawMessage) []byte {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil && !lostSurrogate(raw, s) {
			return []byte(s)
		}
	}
	return raw
}

// appendElement appends item bytes b as one array element: the JSON string
// Python's json.dumps writes for that text (ensure_ascii, so non-ASCII
// characters as \uXXXX), so that the array is byte for byte what the
// Python class writes for the same items.
func appendElement(dst, b []byte) ([]byte, error) {
	quoted, err := json.Marshal(string(b))
	if err != nil {
		return nil, err
	}
	py, err := pyjson.Dumps(quoted, pyjson.Options{EnsureASCII: true, Compact: true})
	if err != nil {
		return nil, err
	}
	return append(dst, py...), nil
}

// encodeMessages writes elems, then the items' bytes as new elements, as
// one compact JSON array: json.dumps(list, separators=(",", ":")).
// Existing elements are kept byte for byte.
func encodeMessages(elems []json.RawMessage, items [][]byte) ([]byte, error) {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	for _, it := range items {
		n += len(it) + len(it)/8 + 3
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	for i, it := range items {
		if i > 0 || len(elems) > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = appendElement(out, it); err != nil {
			return nil, err
		}
	}
	return append(out, ']'), nil
}

// encodeMetadata writes the "<id>:metadata" value as Python's
// json.dumps({"session_id": id, "created_at": str(t), "updated_at": str(t)})
// does: default separators, ensure_ascii.
func encodeMetadata(id string, unix int64) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"session_id": `)
	quoted, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	py, err := pyjson.Dumps(quoted, pyjson.Options{EnsureASCII: true})
	if err != nil {
		return nil, err
	}
	b.Write(py)
	t := strconv.FormatInt(unix, 10)
	b.WriteString(`, "created_at": "` + t + `", "updated_at": "` + t + `"}`)
	return b.Bytes(), nil
}
