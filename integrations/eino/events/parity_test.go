package events_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	einosession "github.com/cloudwego/eino/adk/session"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/eino/events"
	"github.com/agentsessions/sessions/session"
)

// TestParityWithInMemoryStore: odd events read back from a Store over
// SQLite exactly as they read back from eino's own InMemoryStore (what the
// serializer makes of them, the same either way), and one that eino's
// store refuses is refused too.
func TestParityWithInMemoryStore(t *testing.T) {
	ctx := context.Background()
	deep := map[string]any{}
	for range 300 {
		deep = map[string]any{"d": deep}
	}
	withExtra := func(m *schema.Message, extra map[string]any) *schema.Message { m.Extra = extra; return m }
	at := time.Date(2026, 12, 6, 1, 2, 3, 4, time.FixedZone("X", 3600))
	cases := map[string]*adk.SessionEvent[*schema.Message]{
		"invalid utf-8 content": {EventID: "u", Kind: adk.SessionEventMessage, Message: schema.UserMessage("bad \xff\xfe bytes")},
		"controls and unicode":  {EventID: "c", Kind: adk.SessionEventMessage, Message: schema.UserMessage("nul \x00 tab \t ls \u2028 emoji 🙂 quote \" back \\")},
		"html id":               {EventID: "<a&b>\u00e9", Kind: adk.SessionEventMessage, Message: schema.UserMessage("x")},
		"deep extra":            {EventID: "d", Kind: adk.SessionEventMessage, Message: withExtra(schema.UserMessage("x"), deep)},
		"big":                   {EventID: "big", Kind: adk.SessionEventMessage, Message: schema.UserMessage(strings.Repeat("0123456789", 100_000))},
		"timestamp":             {EventID: "t", Timestamp: at, Kind: adk.SessionEventMessage, Message: schema.UserMessage("x")},
		"tool call": {EventID: "tc", Kind: adk.SessionEventMessage, Message: schema.AssistantMessage("", []schema.ToolCall{{
			ID: "call_1", Type: "function", Function: schema.FunctionCall{Name: "f", Arguments: `{"a":[1,2.5,"x"],"n":null}`},
		}})},
		"replaced":  {EventID: "r", Kind: adk.SessionEventMessagesReplaced, MessagesReplaced: &[]*schema.Message{schema.UserMessage("a"), schema.ToolMessage("out", "call_1")}},
		"interrupt": {EventID: "i", Kind: adk.SessionEventInterrupt, Interrupt: &adk.InterruptEvent{Contexts: []*adk.InterruptContext{{InterruptID: "agent:a;tool:t:call_1", Info: "approve?", ToolUseID: "call_1"}}}},
		"extension": {EventID: "x", Kind: "x.app.thing", Extension: &adk.SessionExtensionEvent{}},
		"span": {EventID: "sp", Kind: adk.SessionEventSpanModelRequestEnd, Span: &adk.SpanEvent{SpanID: "s1", Kind: adk.SpanKindModel, StartedAt: at, EndedAt: at.Add(time.Second),
			Model: &adk.ModelSpanMeta{Model: "m", Usage: &adk.ModelUsage{InputTokens: 3, Raw: &schema.TokenUsage{PromptTokens: 3}}, Accepted: true}}},
	}
	st, err := adapters.Open(ctx, "sqlite://"+t.TempDir()+"/s.db")
	require.NoError(t, err)
	defer st.Close()
	ours, err := events.New[*schema.Message](st, events.Options{})
	require.NoError(t, err)
	for name, e := range cases {
		theirs := einosession.NewInMemoryStore[*schema.Message](nil)
		clone := *e
		werr := theirs.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{&clone})
		gerr := ours.AppendEvents(ctx, name, []*adk.SessionEvent[*schema.Message]{e})
		if werr != nil {
			require.Error(t, gerr, "%s: eino's store refuses it (%v)", name, werr)
			continue
		}
		require.NoError(t, gerr, name)
		want, err := theirs.LoadEvents(ctx, "s", nil)
		require.NoError(t, err)
		got, err := ours.LoadEvents(ctx, name, nil)
		require.NoError(t, err)
		require.Len(t, got.Events, 1, name)
		require.True(t, reflect.DeepEqual(want.Events, got.Events), "%s:\n%#v\n%#v", name, want.Events[0], got.Events[0])
		s, err := st.Session(name)
		require.NoError(t, err)
		items, err := session.All(ctx, s)
		require.NoError(t, err)
		_, b64 := items[0].Field("event_base64")
		t.Logf("%s: stored in %d bytes, body as base64: %v", name, len(items[0].Bytes()), b64)
	}

	// The one difference: an event id that is not valid UTF-8 (eino's store
	// keeps it; JSON cannot carry it), refused before anything is written.
	err = ours.AppendEvents(ctx, "bad-id", []*adk.SessionEvent[*schema.Message]{{EventID: "\xff", Kind: adk.SessionEventMessage, Message: schema.UserMessage("x")}})
	require.ErrorIs(t, err, adk.ErrInvalidEventID)
	res, err := ours.LoadEvents(ctx, "bad-id", nil)
	require.NoError(t, err)
	require.Empty(t, res.Events)
}
