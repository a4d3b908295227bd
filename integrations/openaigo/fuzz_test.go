package openaigo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/session"
)

// addFixtures seeds f with every item of testdata/items.jsonl and with
// shapes at the edges of what a stored item may hold.
func addFixtures(f *testing.F) {
	for _, it := range fixtures(f) {
		f.Add(it.Bytes())
	}
	for _, s := range []string{
		`{}`,
		` { "role" : "user" , "content" : "spaced" } `,
		`{"role":"user","content":"<b>&amp;</b> \u2028\u2029 \ud800 \u0000"}`,
		"{\"role\":\"user\",\"content\":\"raw \u2028 and \u2029 and \x7f\"}",
		`{"a":1,"a":2}`,
		`{"n":12345678901234567890,"f":0.1000000000000000055511151231257827,"e":1E+400,"z":-0}`,
		`{"type":"message","content":[{"type":"input_text","text":"x"}],"x":{"y":[[[[[[[[[]]]]]]]]]}}`,
		`{"type":"function_call_output","call_id":"c","output":null}`,
		`{"role":"user","content":"nan","n":NaN}`,
		`[1]`,
		`"string"`,
		`5`,
		`{"role":"user"`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzInputWire: any item the session accepts, given to openai-go's real
// client through InputParams (param.Override of its stored bytes), goes
// out in the request body as those bytes with insignificant white space
// removed, nothing else changed; and the Codec gives back the same bytes.
// An item that is not standard JSON (Python's NaN) fails the request with
// an error; it never goes out altered.
func FuzzInputWire(f *testing.F) {
	addFixtures(f)
	api := newCaptureAPI(f, nil)
	client := newClient(api.URL())
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte) {
		it, err := session.NewItem(raw)
		if err != nil {
			return
		}
		back, err := openaigo.Codec{}.Decode(it)
		require.NoError(t, err)
		again, err := openaigo.Codec{}.Encode(back)
		require.NoError(t, err)
		require.Equal(t, string(it.Bytes()), string(again.Bytes()), "the codec keeps the bytes")

		_, err = client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: openaigo.InputParams([]session.Item{it})},
		})
		if !json.Valid(it.Bytes()) {
			require.Error(t, err, "an item that is not standard JSON is refused, not sent")
			return
		}
		require.NoError(t, err)
		sent := api.lastInput(t)
		require.Len(t, sent, 1)
		require.Equal(t, compact(t, it.Bytes()), string(sent[0]))
	})
}

// FuzzResponseWire: an output item the API sends (any valid JSON value in
// a response's output array) comes out of OutputItems byte for byte when
// the session accepts it, and is refused with an error otherwise, with
// nothing stored by AddResponse; an accepted item, stored and sent back
// through InputParams, goes out as the API sent it (compacted).
func FuzzResponseWire(f *testing.F) {
	addFixtures(f)
	api := newCaptureAPI(f, nil)
	client := newClient(api.URL())
	ctx := context.Background()
	st := memory.New(memory.Options{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = bytes.Trim(raw, " \t\r\n")
		if !json.Valid(raw) {
			return // the API sends JSON; anything else breaks the whole body
		}
		api.reply([][]byte{raw})
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5"})
		require.NoError(t, err, "openai-go reads a response whatever JSON value its output holds")
		s, err := st.Session("fuzz")
		require.NoError(t, err)
		require.NoError(t, s.Clear(ctx))
		h := openaigo.New(s, openaigo.Options{})

		items, err := openaigo.OutputItems(resp)
		if _, perr := session.NewItem(raw); perr != nil {
			require.ErrorIs(t, err, session.ErrInvalidItem)
			require.ErrorIs(t, h.AddResponse(ctx, resp), session.ErrInvalidItem)
			stored, err := session.All(ctx, s)
			require.NoError(t, err)
			require.Empty(t, stored, "a refused response stores nothing")
			return
		}
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.Equal(t, string(raw), string(items[0].Bytes()), "OutputItems keeps the API's bytes")

		require.NoError(t, h.AddResponse(ctx, resp))
		stored, err := session.All(ctx, s)
		require.NoError(t, err)
		require.Len(t, stored, 1)
		require.Equal(t, string(raw), string(stored[0].Bytes()))
		_, err = client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: openaigo.InputParams(stored)},
		})
		require.NoError(t, err)
		sent := api.lastInput(t)
		require.Len(t, sent, 1)
		require.Equal(t, compact(t, raw), string(sent[0]), "the item goes back as the API sent it")
	})
}
