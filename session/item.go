package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Item is one Responses-API input item: a JSON object, kept byte for byte as
// it was given. The zero Item is invalid and is rejected by every AddItems.
//
// An Item is immutable: no method changes it and Bytes returns the stored
// slice, which callers must not modify.
type Item struct {
	d *itemData
}

// itemData is what an Item points to. An Item is one pointer wide, so it
// is cheap to copy and to pass through interfaces.
type itemData struct {
	raw []byte
}

// wrap returns the Item holding b, which must already be validated and is
// taken over.
func wrap(b []byte) Item { return Item{d: &itemData{raw: b}} }

// bytesOf returns the item's bytes, nil for the zero Item.
func (it Item) bytesOf() []byte {
	if it.d == nil {
		return nil
	}
	return it.d.raw
}

// NewItem returns an Item holding a copy of b, or an error wrapping
// ErrInvalidItem when b is not one JSON object.
func NewItem(b []byte) (Item, error) {
	if err := checkObject(b); err != nil {
		return Item{}, err
	}
	return wrap(bytes.Clone(b)), nil
}

// ParseItem is NewItem for a string.
func ParseItem(s string) (Item, error) {
	if err := checkObject([]byte(s)); err != nil {
		return Item{}, err
	}
	return wrap([]byte(s)), nil
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

// Items parses each string with ParseItem.
func Items(ss ...string) ([]Item, error) {
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
	if err := checkObject(b); err != nil {
		return Item{}, err
	}
	return wrap(b), nil
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
	return wrap(bytes.Clone(it.d.raw))
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
	if err := checkObject(b); err != nil {
		return err
	}
	*it = wrap(bytes.Clone(b))
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
// matching); when a key repeats, the last occurrence wins, as in Python.
func (it Item) StringField(key string) (string, bool) {
	raw, ok := it.Field(key)
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// HasField reports whether the item has top-level key.
func (it Item) HasField(key string) bool {
	_, ok := it.Field(key)
	return ok
}

// Field returns the raw JSON value of top-level key. When a key repeats,
// the last occurrence wins.
func (it Item) Field(key string) (json.RawMessage, bool) {
	var found json.RawMessage
	ok := false
	_ = eachField(it.bytesOf(), func(k string, v json.RawMessage) bool {
		if k == key {
			found, ok = v, true
		}
		return true
	})
	return found, ok
}

// eachField calls fn for every top-level member of the object raw, in
// order, until fn returns false.
func eachField(raw []byte, fn func(key string, value json.RawMessage) bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if !fn(key, v) {
			return nil
		}
	}
	return nil
}

// checkObject reports whether b is exactly one JSON object in valid UTF-8,
// allowing surrounding whitespace. The fast path validates in one pass; the
// reason is worked out only for a rejection.
func checkObject(b []byte) error {
	if validObject(b) {
		return nil
	}
	switch {
	case !json.Valid(b):
		return fmt.Errorf("%w: invalid JSON", ErrInvalidItem)
	case !utf8.Valid(b):
		return fmt.Errorf("%w: invalid UTF-8", ErrInvalidItem)
	default:
		return fmt.Errorf("%w: not an object", ErrInvalidItem)
	}
}
