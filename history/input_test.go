package history_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// TestForModel: ForModel strips and checks without pruning, and leaves
// its items alone.
func TestForModel(t *testing.T) {
	items, err := session.Items(
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
