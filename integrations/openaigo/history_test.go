package openaigo_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func TestItemOf(t *testing.T) {
	raw := `{"content":"hi","role":"user"}`
	for name, p := range map[string]responses.ResponseInputItemUnionParam{
		"json.RawMessage": param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(raw)),
		"[]byte":          param.Override[responses.ResponseInputItemUnionParam]([]byte(raw)),
		"string":          param.Override[responses.ResponseInputItemUnionParam](raw),
		"session.Item":    param.Override[responses.ResponseInputItemUnionParam](session.MustItem(raw)),
		"InputParam":      openaigo.InputParam(session.MustItem(raw)),
	} {
		it, err := openaigo.ItemOf(p)
		require.NoError(t, err, name)
		require.Equal(t, raw, it.String(), name)
	}
	// A typed item is what openai-go sends for it.
	typed := responses.ResponseInputItemParamOfFunctionCallOutput("18°C")
	typed.OfFunctionCallOutput.CallID = param.NewOpt("call_1")
	it, err := openaigo.ItemOf(typed)
	require.NoError(t, err)
	want, err := typed.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(want), it.String())
	require.Equal(t, "call_1", it.CallID())
	// Not an object.
	_, err = openaigo.ItemOf(param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(`[1]`)))
	require.ErrorIs(t, err, session.ErrInvalidItem)
	_, err = openaigo.ItemOf(param.NullStruct[responses.ResponseInputItemUnionParam]())
	require.ErrorIs(t, err, session.ErrInvalidItem)
}

func TestOutputItemsNeedRawJSON(t *testing.T) {
	resp := &responses.Response{ID: "resp_1", Output: []responses.ResponseOutputItemUnion{{ID: "msg_1", Type: "message"}}}
	_, err := openaigo.OutputItems(resp)
	require.ErrorIs(t, err, openaigo.ErrNoRawJSON, "a response built in Go has no raw JSON to store")
	_, err = openaigo.OutputItems(nil)
	require.Error(t, err)
	h := openaigo.New(memSession(t, "x"), openaigo.Options{})
	require.ErrorIs(t, h.AddResponse(context.Background(), resp), openaigo.ErrNoRawJSON)
	require.Equal(t, openaigo.Everything, h.Window())
}

// TestOutputItemsNotAnObject: openai-go's client leaves an output value
// that is not a JSON object out of resp.Output without an error;
// OutputItems refuses the response instead of dropping it, and AddResponse
// stores nothing of it.
func TestOutputItemsNotAnObject(t *testing.T) {
	ctx := context.Background()
	msg := []byte(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[]}`)
	for _, bad := range []string{`5`, `"text"`, `[1]`, `null`} {
		api := newCaptureAPI(t, [][]byte{msg, []byte(bad)})
		client := newClient(api.URL())
		resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5"})
		require.NoError(t, err, "openai-go reads the response")
		_, err = openaigo.OutputItems(resp)
		require.ErrorIs(t, err, session.ErrInvalidItem, "output %s", bad)
		require.ErrorContains(t, err, "output 1 of response")
		s := memSession(t, "x")
		require.ErrorIs(t, openaigo.New(s, openaigo.Options{}).AddResponse(ctx, resp), session.ErrInvalidItem)
		stored, err := session.All(ctx, s)
		require.NoError(t, err)
		require.Empty(t, stored, "nothing of a refused response is stored")
	}
}

// TestTurn: a response that needs no approval, with its tool's output,
// lands as one turn, byte for byte, and the next input holds it.
func TestTurn(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, e2eScript)
	client := newClient(api.URL())
	s := memSession(t, "turn")
	run, err := runstate.Open(ctx, s, approvalOpts)
	require.NoError(t, err)
	require.NoError(t, openaigo.RunInput(ctx, run, openaigo.InputParam(session.MustItem(e2eUsers[0]))))
	h := openaigo.New(s, openaigo.Options{Window: 10})
	params, err := h.Params(ctx, e2eBase)
	require.NoError(t, err)
	resp, err := client.Responses.New(ctx, params)
	require.NoError(t, err)
	items, err := openaigo.OutputItems(resp)
	require.NoError(t, err)
	require.Empty(t, openaigo.NeedsApproval(items, nil))
	var outs []session.Item
	for _, o := range resp.Output {
		if o.Type == "function_call" {
			outs = append(outs, session.MustItem(runTool(o.AsFunctionCall())))
		}
	}
	require.NoError(t, openaigo.Turn(ctx, run, resp, outs...))
	in, err := h.Input(ctx)
	require.NoError(t, err)
	got, err := openaigo.ItemsOf(in)
	require.NoError(t, err)
	want := append([]string{e2eUsers[0]}, e2eResponses[0]...)
	want = append(want, texts(outs)...)
	require.Equal(t, want, texts(got))
	resp, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: in}})
	require.NoError(t, err)
	require.NoError(t, openaigo.Finish(ctx, run, resp))
	all, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Equal(t, append(want, e2eResponses[1]...), texts(all), "every item byte for byte")
	_, _, rejected := api.stats()
	require.Empty(t, rejected)
}
