package events

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/agentsessions/sessions/session"
)

// ItemType is the "type" of the session item that holds one eino session
// event (see the package documentation for the envelope's layout).
const ItemType = "eino.session_event"

// envelopeVersion is the envelope's "v". A decoder refuses any other value,
// so that a later layout is never misread.
const envelopeVersion = 1

// ErrCorruptEvent reports a stored item that is not an eino session event
// this package wrote: a foreign item in the session, a damaged envelope, or
// an event the serializer cannot decode. Errors wrapping it are
// *CorruptEventError.
var ErrCorruptEvent = errors.New("events: stored item is not an eino session event")

// CorruptEventError reports which stored item is not an eino session event
// and why. It names the item, never its content. It wraps ErrCorruptEvent.
type CorruptEventError struct {
	SessionID string // the store's session id; "" when not known
	Index     int    // the item's position in the session; -1 when not known
	EventID   string // the envelope's event id; "" when not known
	Reason    string
}

func (e *CorruptEventError) Error() string {
	var b strings.Builder
	b.WriteString("events: ")
	if e.SessionID != "" {
		fmt.Fprintf(&b, "session %q, ", e.SessionID)
	}
	if e.Index >= 0 {
		fmt.Fprintf(&b, "item %d", e.Index)
	} else {
		b.WriteString("item")
	}
	if e.EventID != "" {
		fmt.Fprintf(&b, " (event %q)", e.EventID)
	}
	b.WriteString(" is not an eino session event: ")
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns ErrCorruptEvent.
func (e *CorruptEventError) Unwrap() error { return ErrCorruptEvent }

func corrupt(eventID, reason string) error {
	return &CorruptEventError{Index: -1, EventID: eventID, Reason: reason}
}

// at fills in where a *CorruptEventError was found; other errors pass.
func at(err error, sessionID string, index int) error {
	var ce *CorruptEventError
	if errors.As(err, &ce) {
		ce.SessionID, ce.Index = sessionID, index
	}
	return err
}

// defaultSerializer is what eino's own stores (adk/session.InMemoryStore,
// FileStore) and its Runner use for session events.
func defaultSerializer() schema.Serializer { return &schema.HumanReadableSerializer{} }

// EncodeEvent returns the session item that stores e, its bytes encoded by
// ser (nil: schema.HumanReadableSerializer, as eino's own stores). Like
// eino's stores, it first normalizes e.Kind from e's payload
// (adk.NormalizeSessionEventKind), which sets an empty Kind. An event
// without an EventID is adk.ErrInvalidEventID.
func EncodeEvent[M adk.MessageType](e *adk.SessionEvent[M], ser schema.Serializer) (session.Item, error) {
	if e == nil || e.EventID == "" {
		return session.Item{}, adk.ErrInvalidEventID
	}
	if !utf8.ValidString(e.EventID) {
		// JSON would carry another id than the event's.
		return session.Item{}, fmt.Errorf("events: event id %q is not valid UTF-8: %w", e.EventID, adk.ErrInvalidEventID)
	}
	if err := adk.NormalizeSessionEventKind(e); err != nil {
		return session.Item{}, fmt.Errorf("events: event %q: %w", e.EventID, err)
	}
	if !utf8.ValidString(string(e.Kind)) {
		return session.Item{}, fmt.Errorf("events: event %q: kind %q is not valid UTF-8", e.EventID, e.Kind)
	}
	if ser == nil {
		ser = defaultSerializer()
	}
	data, err := ser.Marshal(e)
	if err != nil {
		return session.Item{}, fmt.Errorf("events: encode event %q: %w", e.EventID, err)
	}
	if json.Valid(data) && utf8.Valid(data) {
		// The serializer's JSON, embedded as it is: Field("event") gives
		// these bytes back. An item refuses what encoding/json lets pass
		// (nesting deeper than session.MaxItemDepth): base64 then.
		if it, err := session.NewItem(envelope(e.EventID, string(e.Kind), `"event":`, data)); err == nil {
			return it, nil
		}
	}
	b64 := base64.StdEncoding.EncodeToString(data)
	it, err := session.NewItem(envelope(e.EventID, string(e.Kind), `"event_base64":`, []byte(`"`+b64+`"`)))
	if err != nil {
		return session.Item{}, fmt.Errorf("events: encode event %q: %w", e.EventID, err)
	}
	return it, nil
}

// envelope writes the item: the header, then key (with its colon) and
// value as given.
func envelope(id, kind, key string, value []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(value) + len(id) + len(kind) + 80)
	b.WriteString(`{"type":"` + ItemType + `","v":` + strconv.Itoa(envelopeVersion) + `,"event_id":`)
	writeJSONString(&b, id)
	b.WriteString(`,"kind":`)
	writeJSONString(&b, kind)
	b.WriteByte(',')
	b.WriteString(key)
	b.Write(value)
	b.WriteByte('}')
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// header is what the log keeps of each stored event without decoding it.
type header struct {
	id   string
	kind adk.SessionEventKind
}

// parseHeader checks it is an envelope and returns its event id and kind.
func parseHeader(it session.Item) (header, error) {
	if typ, _ := it.StringField("type"); typ != ItemType {
		return header{}, corrupt("", "its type is not "+strconv.Quote(ItemType))
	}
	if v, ok := it.Field("v"); !ok || string(v) != strconv.Itoa(envelopeVersion) {
		return header{}, corrupt("", "its envelope version is not "+strconv.Itoa(envelopeVersion))
	}
	id, ok := it.StringField("event_id")
	if !ok || id == "" {
		return header{}, corrupt("", "no event_id")
	}
	kind, ok := it.StringField("kind")
	if !ok {
		return header{}, corrupt(id, "no kind")
	}
	return header{id: strings.Clone(id), kind: adk.SessionEventKind(strings.Clone(kind))}, nil
}

// DecodeEvent returns the event it stores: the inverse of EncodeEvent with
// the same serializer (nil: schema.HumanReadableSerializer). Anything else
// (another item, a damaged envelope, bytes ser cannot decode, an event
// whose id or kind differs from its envelope's) is an error wrapping
// ErrCorruptEvent.
func DecodeEvent[M adk.MessageType](it session.Item, ser schema.Serializer) (*adk.SessionEvent[M], error) {
	h, err := parseHeader(it)
	if err != nil {
		return nil, err
	}
	return decodeBody[M](it, h, ser)
}

func decodeBody[M adk.MessageType](it session.Item, h header, ser schema.Serializer) (ev *adk.SessionEvent[M], err error) {
	raw, hasJSON := it.Field("event")
	b64, hasB64 := it.StringField("event_base64")
	if _, present := it.Field("event_base64"); present && !hasB64 {
		return nil, corrupt(h.id, "event_base64 is not a string")
	}
	var data []byte
	switch {
	case hasJSON && hasB64:
		return nil, corrupt(h.id, "both event and event_base64")
	case hasJSON:
		data = raw
	case hasB64:
		data, err = base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, corrupt(h.id, "event_base64 is not base64")
		}
	default:
		return nil, corrupt(h.id, "no event body")
	}
	if ser == nil {
		ser = defaultSerializer()
	}
	defer func() {
		// A serializer is eino's code over stored bytes: a panic on hostile
		// input is a corrupt record, not a crash of the reader.
		if r := recover(); r != nil {
			ev, err = nil, corrupt(h.id, "the serializer failed on its body")
		}
	}()
	var e adk.SessionEvent[M]
	if err := ser.Unmarshal(data, &e); err != nil {
		// The serializer's message may quote the stored bytes: not echoed.
		return nil, corrupt(h.id, "the serializer cannot decode its body")
	}
	if err := adk.NormalizeSessionEventKind(&e); err != nil {
		return nil, corrupt(h.id, err.Error())
	}
	if e.EventID != h.id || e.Kind != h.kind {
		return nil, corrupt(h.id, "the envelope's id or kind differs from its event's")
	}
	return &e, nil
}

// sameEvent reports whether the stored item a and the item b (encoded with
// the same serializer) hold the same event: the same bytes, or bodies that
// decode to deeply equal events (a serializer need not be deterministic).
func sameEvent[M adk.MessageType](a, b session.Item, ser schema.Serializer) bool {
	if a.Equal(b) {
		return true
	}
	ea, err := DecodeEvent[M](a, ser)
	if err != nil {
		return false
	}
	eb, err := DecodeEvent[M](b, ser)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(ea, eb)
}
