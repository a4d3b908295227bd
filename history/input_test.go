package history_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// TestModelInputStripsPythonMetadata: the keys the Python SDK strips
// before a model call (strip_internal_input_item_metadata) are not sent;
// the stored bytes keep them.
func TestModelInputStripsPythonMetadata(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"both keys", `{"type":"function_call","call_id":"a","_agents_tool_description":"Reads a file","name":"f","_agents_tool_title":"Read","arguments":"{}"}`,
			`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`},
		{"first and last members, spaces kept", `{ "_agents_tool_title" : "T" , "type": "function_call", "call_id": "a", "_agents_tool_description": "D" }`,
			`{ "type": "function_call", "call_id": "a" }`},
		{"an escaped key and a repeated one", `{"type":"function_call","_agents_tool_\u0074itle":"T","call_id":"a","_agents_tool_title":"U"}`,
			`{"type":"function_call","call_id":"a"}`},
		{"nested keys stay, as in Python", `{"type":"function_call","call_id":"a","caller":{"_agents_tool_title":"T"}}`,
			`{"type":"function_call","call_id":"a","caller":{"_agents_tool_title":"T"}}`},
		{"an item without them is unchanged", `{"type":"function_call",  "call_id":"a","x":[1,2.50,"NaN"]}`,
			`{"type":"function_call",  "call_id":"a","x":[1,2.50,"NaN"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newMem(t)
			items, err := session.ParseItems(tc.in, `{"type":"function_call_output","call_id":"a","output":"1"}`)
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, items))
			got, err := history.ModelInput(ctx, s, 2)
			require.NoError(t, err)
			require.Len(t, got, 2)
			require.Equal(t, tc.want, got[0].String())
			stored, err := session.All(ctx, s)
			require.NoError(t, err)
			require.Equal(t, tc.in, stored[0].String(), "the stored bytes are untouched")
		})
	}
}

// TestModelInputRefusesNonFiniteNumbers: Python's NaN, Infinity and
// -Infinity are items (session.Item holds them) but not JSON the API
// takes: ModelInput reports the item and where in it the number is.
func TestModelInputRefusesNonFiniteNumbers(t *testing.T) {
	tests := []struct {
		name string
		rows []string
		ok   bool
		want history.NonFiniteError
	}{
		{"NaN in an output", []string{`{"role":"user","content":"q"}`, `{"type":"function_call","call_id":"a"}`, `{"type":"function_call_output","call_id":"a","output":{"score":NaN}}`, `{"role":"user","content":"r"}`}, false,
			history.NonFiniteError{Index: 2, FromNewest: 2, Type: "function_call_output", ID: "a", Path: "output.score", Token: "NaN"}},
		{"-Infinity in an array", []string{`{"type":"function_call_output","call_id":"gone","output":"x"}`, `{"role":"user","content":"q"}`, `{"type":"message","id":"msg_1","role":"assistant","content":"x","logprobs":[1,-Infinity]}`}, false,
			history.NonFiniteError{Index: 1, FromNewest: 1, Type: "message", ID: "msg_1", Path: "logprobs[1]", Token: "-Infinity"}},
		{"Infinity at the top", []string{`{"role":"user","content":"q","t":Infinity}`}, false,
			history.NonFiniteError{Index: 0, FromNewest: 1, Path: "t", Token: "Infinity"}},
		{"the words in strings are fine", []string{`{"role":"user","content":"NaN Infinity -Infinity \"NaN\"","NaN":"Infinity"}`}, true, history.NonFiniteError{}},
		{"a dropped item is not sent, so not refused", []string{`{"type":"function_call_output","call_id":"gone","output":NaN}`, `{"role":"user","content":"q"}`}, true, history.NonFiniteError{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newMem(t)
			items, err := session.ParseItems(tc.rows...)
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, items))
			_, err = history.ModelInput(ctx, s, math.MaxInt)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), "Infinity") || strings.Contains(err.Error(), "NaN"), err.Error())
			var nf *history.NonFiniteError
			require.ErrorAs(t, err, &nf)
			require.ErrorIs(t, err, history.ErrNonFinite)
			require.Equal(t, tc.want, *nf)
			t.Log(err)
		})
	}
}

// TestForModel: ForModel strips and checks without pruning, and leaves
// its items alone.
func TestForModel(t *testing.T) {
	items, err := session.ParseItems(
		`{"type":"function_call_output","call_id":"gone","output":"x","_agents_tool_title":"T"}`,
		`{"role":"user","content":"q","meta":{"a b":[0,{"x":NaN}]}}`,
	)
	require.NoError(t, err)
	got, err := history.ForModel(items[:1])
	require.NoError(t, err)
	require.Equal(t, `{"type":"function_call_output","call_id":"gone","output":"x"}`, got[0].String())
	require.Contains(t, items[0].String(), "_agents_tool_title")
	_, err = history.ForModel(items)
	var nf *history.NonFiniteError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, history.NonFiniteError{Index: 1, FromNewest: 1, Path: `meta["a b"][1].x`, Token: "NaN"}, *nf)
}
