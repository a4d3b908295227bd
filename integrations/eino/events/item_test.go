package events_test

import (
	"encoding/base64"
	"errors"
	"reflect"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/integrations/eino/events"
	"github.com/agentsessions/sessions/session"
)

// TestEnvelope pins the stored layout the package documentation gives.
func TestEnvelope(t *testing.T) {
	e := &adk.SessionEvent[*schema.Message]{EventID: "e-1", Message: schema.UserMessage("hi")} // Kind set by the encoder
	it, err := events.EncodeEvent(e, nil)
	require.NoError(t, err)
	require.Equal(t, adk.SessionEventMessage, e.Kind, "normalized in place, as eino's stores do")
	// The serializer does not order an object's keys the same way every
	// time, so the body is checked by what it decodes to.
	const head = `{"type":"eino.session_event","v":1,"event_id":"e-1","kind":"message","event":{`
	require.Equal(t, head, it.String()[:len(head)])
	raw, ok := it.Field("event")
	require.True(t, ok)
	require.Equal(t, it.String(), head[:len(head)-1]+string(raw)+"}", "the body is the rest, as the serializer wrote it")
	var fromBody adk.SessionEvent[*schema.Message]
	require.NoError(t, (&schema.HumanReadableSerializer{}).Unmarshal(raw, &fromBody))
	require.True(t, reflect.DeepEqual(e, &fromBody))
	require.Equal(t, events.ItemType, it.Type())

	// What the Responses-API rules make of it: neither a call nor an
	// output, nothing to diagnose.
	require.False(t, history.IsCall(it))
	require.False(t, history.IsOutput(it))
	require.Empty(t, history.Diagnose([]session.Item{it}))

	back, err := events.DecodeEvent[*schema.Message](it, nil)
	require.NoError(t, err)
	require.True(t, reflect.DeepEqual(e, back))
}

// TestEnvelopeBase64: a serializer whose output is not JSON (gob) is
// stored base64-encoded, and read back exactly.
func TestEnvelopeBase64(t *testing.T) {
	ser := &schema.GobSerializer{}
	e := &adk.SessionEvent[*schema.AgenticMessage]{EventID: "g", Kind: adk.SessionEventMessage, Message: schema.UserAgenticMessage("hi")}
	it, err := events.EncodeEvent(e, ser)
	require.NoError(t, err)
	_, hasJSON := it.Field("event")
	require.False(t, hasJSON)
	b64, ok := it.StringField("event_base64")
	require.True(t, ok)
	body, err := ser.Marshal(e)
	require.NoError(t, err)
	require.Equal(t, base64.StdEncoding.EncodeToString(body), b64)
	back, err := events.DecodeEvent[*schema.AgenticMessage](it, ser)
	require.NoError(t, err)
	require.True(t, reflect.DeepEqual(e, back))

	// Read with another serializer than the one that wrote it: an error.
	_, err = events.DecodeEvent[*schema.AgenticMessage](it, nil)
	require.ErrorIs(t, err, events.ErrCorruptEvent)
}

// TestDecodeRefuses lists what DecodeEvent refuses, each with
// ErrCorruptEvent and a message that does not quote the item.
func TestDecodeRefuses(t *testing.T) {
	for name, raw := range map[string]string{
		"responses item":  `{"role":"user","content":"SECRET"}`,
		"other type":      `{"type":"message","v":1,"event_id":"a","kind":"message","event":{"event_id":"a"}}`,
		"no version":      `{"type":"eino.session_event","event_id":"a","kind":"message","event":{}}`,
		"version 2":       `{"type":"eino.session_event","v":2,"event_id":"a","kind":"message","event":{}}`,
		"version string":  `{"type":"eino.session_event","v":"1","event_id":"a","kind":"message","event":{}}`,
		"empty id":        `{"type":"eino.session_event","v":1,"event_id":"","kind":"message","event":{}}`,
		"id not a string": `{"type":"eino.session_event","v":1,"event_id":7,"kind":"message","event":{}}`,
		"no kind":         `{"type":"eino.session_event","v":1,"event_id":"a","event":{}}`,
		"no body":         `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message"}`,
		"two bodies":      `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event":{},"event_base64":""}`,
		"bad base64":      `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event_base64":"%%%"}`,
		"base64 number":   `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event_base64":5}`,
		"body not event":  `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event":"SECRET"}`,
		"id differs":      `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event":{"event_id":"b","kind":"message","message":{"role":"user","content":"SECRET"}}}`,
		"kind differs":    `{"type":"eino.session_event","v":1,"event_id":"a","kind":"cancel","event":{"event_id":"a","kind":"message","message":{"role":"user","content":"SECRET"}}}`,
		"unknown kind":    `{"type":"eino.session_event","v":1,"event_id":"a","kind":"zzz","event":{"event_id":"a","kind":"zzz","message":{"role":"user","content":"SECRET"}}}`,
		"no payload":      `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event":{"event_id":"a","kind":"message"}}`,
		"two payloads":    `{"type":"eino.session_event","v":1,"event_id":"a","kind":"message","event":{"event_id":"a","message":{"role":"user","content":"SECRET"},"cancel":{}}}`,
	} {
		it, err := session.ParseItem(raw)
		require.NoError(t, err, name)
		_, err = events.DecodeEvent[*schema.Message](it, nil)
		require.ErrorIs(t, err, events.ErrCorruptEvent, name)
		var ce *events.CorruptEventError
		require.True(t, errors.As(err, &ce), name)
		require.NotContains(t, err.Error(), "SECRET", name)
		t.Logf("%s: %v", name, err)
	}
}

// FuzzDecodeEvent: DecodeEvent never panics on stored bytes; what it
// refuses wraps ErrCorruptEvent; what it accepts has the envelope's id and
// kind and encodes to an item that decodes to the same event.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range []*adk.SessionEvent[*schema.Message]{
		{EventID: "e1", Kind: adk.SessionEventMessage, Message: schema.UserMessage("hello")},
		{EventID: "e2", Kind: adk.SessionEventSessionStatusIdle, Lifecycle: &adk.LifecycleEvent{State: adk.SessionRunStateIdle, StopReason: &adk.StopReason{Type: "end_turn"}}},
		{EventID: "e3", Kind: adk.SessionEventMessage, Message: schema.AssistantMessage("", []schema.ToolCall{{ID: "c", Function: schema.FunctionCall{Name: "f", Arguments: "{}"}}})},
	} {
		it, err := events.EncodeEvent(e, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(it.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		it, err := session.NewItem(b)
		if err != nil {
			return
		}
		check[*schema.Message](t, it)
		check[*schema.AgenticMessage](t, it)
	})
}

func check[M adk.MessageType](t *testing.T, it session.Item) {
	e, err := events.DecodeEvent[M](it, nil)
	if err != nil {
		if !errors.Is(err, events.ErrCorruptEvent) {
			t.Fatalf("error %v does not wrap ErrCorruptEvent", err)
		}
		return
	}
	id, _ := it.StringField("event_id")
	kind, _ := it.StringField("kind")
	if e.EventID != id || string(e.Kind) != kind {
		t.Fatalf("decoded %q/%q from envelope %q/%q", e.EventID, e.Kind, id, kind)
	}
	// The serializer may normalize once (an empty list it decoded is
	// omitted when encoded, and decodes as nil): from then on, an event
	// encodes to an item that decodes to the same event.
	once := roundTrip(t, e)
	if twice := roundTrip(t, once); !reflect.DeepEqual(once, twice) {
		t.Fatalf("re-encoded event differs:\n%#v\n%#v", once, twice)
	}
}

func roundTrip[M adk.MessageType](t *testing.T, e *adk.SessionEvent[M]) *adk.SessionEvent[M] {
	it, err := events.EncodeEvent(e, nil)
	if err != nil {
		t.Fatalf("a decoded event does not encode: %v", err)
	}
	back, err := events.DecodeEvent[M](it, nil)
	if err != nil {
		t.Fatalf("a re-encoded event does not decode: %v", err)
	}
	return back
}
