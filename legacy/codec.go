package legacy

import (
	"encoding/json"
	"fmt"

	"github.com/agentsessions/sessions/session"
)

// Codec converts between a foreign session's item type T and session.Item.
//
// Encode and Decode must round-trip: Encode(Decode(it)) holds the same
// JSON object as it. Only a codec that keeps the exact bytes (as JSONCodec
// does for json.RawMessage and session.Item) keeps items byte for byte; a
// codec over a Go struct re-encodes them (key order, spacing and number
// spelling may change).
type Codec[T any] interface {
	// Encode returns v as an Item. An error means v is not a JSON object.
	Encode(v T) (session.Item, error)
	// Decode returns it as a T.
	Decode(it session.Item) (T, error)
}

// JSONCodec is the default Codec: encoding/json in both directions.
//
// When *T implements json.Marshaler or json.Unmarshaler it is called
// directly, without encoding/json's compaction and HTML escaping, so a T
// that keeps raw bytes (json.RawMessage, session.Item) round-trips byte for
// byte. Other types go through json.Marshal and json.Unmarshal, and keep
// only what their Go type models.
//
// Use it with json.RawMessage or session.Item. Over openai-go's
// responses.ResponseInputItemUnionParam it is lossy: that union does not
// decode an input message written without "type" (the SDK's own
// {"content":"hi","role":"user"}), so every such stored item is reported as
// an unreadable record and hidden, and the items it does decode lose what
// the union does not model (an assistant message's id and status, explicit
// nulls, unknown members, number precision). For that item type use the
// Codec of github.com/agentsessions/sessions/integrations/openaigo, which
// keeps each item's raw JSON both ways; code built on openai-go keeps its
// history with that package's History.
type JSONCodec[T any] struct{}

// Encode marshals v and checks that the result is one JSON object.
func (JSONCodec[T]) Encode(v T) (session.Item, error) {
	var (
		b   []byte
		err error
	)
	if m, ok := any(&v).(json.Marshaler); ok {
		b, err = m.MarshalJSON()
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return session.Item{}, fmt.Errorf("%w: encode: %v", session.ErrInvalidItem, err)
	}
	return session.NewItem(b)
}

// Decode unmarshals the item's bytes into a T.
func (JSONCodec[T]) Decode(it session.Item) (T, error) {
	var v T
	if !it.Valid() {
		return v, session.ErrInvalidItem
	}
	var err error
	if u, ok := any(&v).(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(it.Bytes())
	} else {
		err = json.Unmarshal(it.Bytes(), &v)
	}
	if err != nil {
		return v, fmt.Errorf("legacy: decode item: %w", err)
	}
	return v, nil
}

// codecOr returns c, or JSONCodec[T] when c is nil.
func codecOr[T any](c Codec[T]) Codec[T] {
	if c == nil {
		return JSONCodec[T]{}
	}
	return c
}

// jsonBytes returns v's JSON text as well as it can be had, for a corrupt
// record report: MarshalJSON's output as is (a json.RawMessage holding
// garbage returns the garbage), otherwise json.Marshal's.
func jsonBytes[T any](v T) ([]byte, error) {
	if m, ok := any(&v).(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return json.Marshal(v)
}
