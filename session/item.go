package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Item is one Responses-API input item: a JSON object as Python's json
// module reads it (RFC 8259 in valid UTF-8, plus the NaN, Infinity and
// -Infinity tokens), kept byte for byte as it was given. The zero Item is
// invalid and is rejected by every AddItems.
//
// An Item is immutable: no method changes it, and Bytes, Field and
// StringField return views of the stored bytes, which callers must not
// modify. Its top-level members are located once, when it is validated, so
// the accessors (Type, CallID, Field, ...) cost a few comparisons each and
// never parse the item again.
type Item struct {
	d *itemData
}

// itemData is what an Item points to. An Item is one pointer wide, so it
// is cheap to copy and to pass through interfaces. ix locates the top-level
// members, recorded while the bytes were validated, so that every accessor
// answers without parsing the item again.
type itemData struct {
	raw []byte
	ix  index
}

// newItem validates b and returns the Item holding it; b is taken over.
func newItem(b []byte) (Item, error) {
	return (&itemData{}).hold(b)
}

// hold validates b, records it in d and returns the Item for d; b is taken
// over. d must be fresh: an Item never changes.
func (d *itemData) hold(b []byte) (Item, error) {
	if !scanObject(b, &d.ix) {
		return Item{}, invalidReason(b)
	}
	d.raw = b
	return Item{d: d}, nil
}

// bytesOf returns the item's bytes, nil for the zero Item.
func (it Item) bytesOf() []byte {
	if it.d == nil {
		return nil
	}
	return it.d.raw
}

// NewItem returns an Item holding a copy of b, or an error wrapping
// ErrInvalidItem when b is not one JSON object (see Item).
func NewItem(b []byte) (Item, error) {
	return newItem(bytes.Clone(b))
}

// ParseItem is NewItem for a string.
func ParseItem(s string) (Item, error) {
	return newItem([]byte(s))
}

// MustItem is ParseItem that panics on invalid input; for tests and
// literals.
func MustItem(s string) Item {
	it, err := ParseItem(s)
	if err != nil {
		panic(err)
	}
	return it
}

// ParseItems parses each string with ParseItem.
func ParseItems(ss ...string) ([]Item, error) {
	out := make([]Item, len(ss))
	for i, s := range ss {
		it, err := ParseItem(s)
		if err != nil {
			return nil, &ItemError{Index: i, Err: err}
		}
		out[i] = it
	}
	return out, nil
}

// MarshalItem encodes v with encoding/json and returns it as an Item.
func MarshalItem(v any) (Item, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Item{}, fmt.Errorf("%w: %v", ErrInvalidItem, err)
	}
	return newItem(b)
}

// Valid reports whether the item holds a JSON object.
func (it Item) Valid() bool { return it.d != nil }

// Bytes returns the item's JSON text. The slice is shared: do not modify it.
func (it Item) Bytes() []byte { return it.bytesOf() }

// String returns the item's JSON text.
func (it Item) String() string { return string(it.bytesOf()) }

// Clone returns an Item that shares no memory with it.
func (it Item) Clone() Item {
	if it.d == nil {
		return Item{}
	}
	return Item{d: &itemData{raw: bytes.Clone(it.d.raw), ix: it.d.ix}}
}

// Equal reports whether two items have identical bytes.
func (it Item) Equal(other Item) bool { return bytes.Equal(it.bytesOf(), other.bytesOf()) }

// MarshalJSON returns the item's bytes unchanged.
func (it Item) MarshalJSON() ([]byte, error) {
	if it.d == nil {
		return nil, ErrInvalidItem
	}
	return it.d.raw, nil
}

// UnmarshalJSON keeps a copy of b when it is a JSON object. The copy is
// the exact text of the value; encoding/json has already trimmed the
// surrounding whitespace.
func (it *Item) UnmarshalJSON(b []byte) error {
	n, err := newItem(bytes.Clone(b))
	if err != nil {
		return err
	}
	*it = n
	return nil
}

// Type returns the item's top-level "type" string, or "".
func (it Item) Type() string { s, _ := it.StringField("type"); return s }

// CallID returns the item's top-level "call_id" string, or "".
func (it Item) CallID() string { s, _ := it.StringField("call_id"); return s }

// ID returns the item's top-level "id" string, or "".
func (it Item) ID() string { s, _ := it.StringField("id"); return s }

// Role returns the item's top-level "role" string, or "".
func (it Item) Role() string { s, _ := it.StringField("role"); return s }

// StringField returns the value of top-level key when it is a JSON string.
// Keys match exactly (unlike encoding/json's case-insensitive struct
// matching) after unescaping; when a key repeats, the last occurrence wins,
// as in Python. A string without escapes shares the item's memory.
func (it Item) StringField(key string) (string, bool) {
	raw, ok := it.Field(key)
	if !ok || raw[0] != '"' {
		return "", false
	}
	return stringValue(raw), true
}

// TypeCallRole returns Type(), CallID() and HasField("role") together, in
// one pass over the item's members: what the pairing and dedup rules read
// of every item.
func (it Item) TypeCallRole() (typ, callID string, hasRole bool) {
	if it.d == nil {
		return "", "", false
	}
	return it.d.typeCallRole()
}

// HasField reports whether the item has top-level key.
func (it Item) HasField(key string) bool {
	_, ok := it.Field(key)
	return ok
}

// Field returns the raw JSON value of top-level key. When a key repeats,
// the last occurrence wins. The slice is shared with the item: do not
// modify it.
func (it Item) Field(key string) (json.RawMessage, bool) {
	if it.d == nil {
		return nil, false
	}
	v, ok := it.d.lookup(key)
	return json.RawMessage(v), ok
}

// invalidReason says why b, which scanObject rejected, is not an item. It
// runs only on a rejection.
func invalidReason(b []byte) error {
	switch {
	case tooDeep(b):
		return fmt.Errorf("%w: nested deeper than %d levels", ErrInvalidItem, MaxItemDepth)
	case !json.Valid(neutralTokens(b)):
		return fmt.Errorf("%w: invalid JSON", ErrInvalidItem)
	case !utf8.Valid(b):
		return fmt.Errorf("%w: invalid UTF-8", ErrInvalidItem)
	default:
		return fmt.Errorf("%w: not an object", ErrInvalidItem)
	}
}

// tooDeep reports whether b opens more than MaxItemDepth containers at
// once, counting outside strings.
func tooDeep(b []byte) bool {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxItemDepth {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// neutralTokens returns b with each NaN, Infinity and -Infinity token
// outside strings replaced by null, so that encoding/json judges the rest
// of the grammar as Python's json.loads does. A token glued to anything
// (-NaN, NaN1, +Infinity) stays invalid after the replacement.
func neutralTokens(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch c {
			case '\\':
				if i+1 < len(b) {
					out = append(out, c)
					i++
					c = b[i]
				}
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case hasLiteral(b, i, "-Infinity"):
			out = append(out, "null"...)
			i += len("-Infinity") - 1
			continue
		case hasLiteral(b, i, "Infinity"):
			out = append(out, "null"...)
			i += len("Infinity") - 1
			continue
		case hasLiteral(b, i, "NaN"):
			out = append(out, "null"...)
			i += len("NaN") - 1
			continue
		}
		out = append(out, c)
	}
	return out
}
