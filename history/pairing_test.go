package history_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func types(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Type() + ":" + it.CallID() + it.ID()
	}
	return out
}

func TestCallOutputTable(t *testing.T) {
	for call, out := range map[string]string{
		"program": "program_output", "function_call": "function_call_output",
		"custom_tool_call": "custom_tool_call_output", "shell_call": "shell_call_output",
		"apply_patch_call": "apply_patch_call_output", "computer_call": "computer_call_output",
		"local_shell_call": "local_shell_call_output", "tool_search_call": "tool_search_output",
	} {
		got, ok := history.OutputTypeFor(call)
		require.True(t, ok, call)
		require.Equal(t, out, got)
		back, ok := history.CallTypeFor(out)
		require.True(t, ok)
		require.Equal(t, call, back)
		c := session.MustItem(`{"type":"` + call + `","call_id":"c1"}`)
		o := session.MustItem(`{"type":"` + out + `","call_id":"c1"}`)
		ck, _ := history.CallKey(c)
		ok2, _ := history.AnsweredKey(o)
		require.Equal(t, ck, ok2, "%s pairs with %s", call, out)
	}
	req := session.MustItem(`{"type":"mcp_approval_request","id":"r1"}`)
	resp := session.MustItem(`{"type":"mcp_approval_response","approval_request_id":"r1","approve":true}`)
	k1, ok := history.CallKey(req)
	require.True(t, ok)
	k2, ok := history.AnsweredKey(resp)
	require.True(t, ok)
	require.Equal(t, k1, k2)
}

func TestPruneOrphans(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		opts history.PruneOptions
		want []string
	}{
		{
			name: "a paired call stays, an orphan call and its reasoning go",
			in: []string{
				`{"role":"user","content":"hi"}`,
				`{"type":"reasoning","id":"rs1","summary":[]}`,
				`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`,
				`{"type":"function_call_output","call_id":"a","output":"ok"}`,
				`{"type":"reasoning","id":"rs2","summary":[]}`,
				`{"type":"reasoning","id":"rs3","summary":[]}`,
				`{"type":"shell_call","call_id":"b"}`,
			},
			want: []string{":", "reasoning:rs1", "function_call:a", "function_call_output:a"},
		},
		{
			name: "an output of the wrong type does not pair",
			in: []string{
				`{"type":"function_call","call_id":"a"}`,
				`{"type":"custom_tool_call_output","call_id":"a"}`,
			},
			want: []string{"custom_tool_call_output:a"},
		},
		{
			name: "a lone reasoning item with no dropped follower stays",
			in: []string{
				`{"type":"reasoning","id":"rs1"}`,
				`{"type":"message","role":"assistant","content":"x"}`,
			},
			want: []string{"reasoning:rs1", "message:"},
		},
		{
			name: "mcp approval requests are not pruned; orphan responses go with DropOrphanOutputs",
			in: []string{
				`{"type":"mcp_approval_request","id":"r1"}`,
				`{"type":"mcp_approval_response","approval_request_id":"r0"}`,
				`{"type":"function_call_output","call_id":"gone"}`,
			},
			opts: history.PruneOptions{DropOrphanOutputs: true},
			want: []string{"mcp_approval_request:r1"},
		},
		{
			name: "an anonymous tool search pairs by position",
			in: []string{
				`{"type":"tool_search_call"}`,
				`{"type":"tool_search_output"}`,
				`{"type":"tool_search_call"}`,
			},
			want: []string{"tool_search_call:", "tool_search_output:"},
		},
		{
			name: "an orphan program takes what it owns; an active one stays",
			in: []string{
				`{"type":"program","call_id":"p1"}`,
				`{"type":"shell_call","call_id":"s1","caller":{"caller_id":"p1"}}`,
				`{"type":"program","call_id":"p2"}`,
				`{"type":"function_call","call_id":"f2","caller":{"caller_id":"p2"}}`,
			},
			want: []string{"program:p1", "shell_call:s1"},
		},
		{
			name: "ineligible calls are kept",
			in: []string{
				`{"type":"function_call","call_id":"a"}`,
				`{"type":"function_call","call_id":"b"}`,
			},
			opts: history.PruneOptions{CallEligible: func(i int) bool { return i == 1 }},
			want: []string{"function_call:a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items, err := session.ParseItems(tc.in...)
			require.NoError(t, err)
			got := keepFlagged(items, history.PruneOrphans(items, tc.opts))
			require.Equal(t, tc.want, types(got))
		})
	}
}

func TestModelInputNeverStartsWithAnOrphanOutput(t *testing.T) {
	ctx := context.Background()
	s := newMem(t)
	items, err := session.ParseItems(
		`{"role":"user","content":"q"}`,
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`,
		`{"type":"message","role":"assistant","content":"done"}`,
		`{"type":"function_call","call_id":"b","name":"f","arguments":"{}"}`,
	)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items))
	got, err := history.ModelInput(ctx, s, 3)
	require.NoError(t, err)
	require.Equal(t, []string{"message:"}, types(got),
		"the window cut a's call off, so its output goes; b has no output yet, so it goes")
	got, err = history.ModelInput(ctx, s, 4)
	require.NoError(t, err)
	require.Equal(t, []string{"function_call:a", "function_call_output:a", "message:"}, types(got))
}

// keepFlagged returns the items whose flag is set, in order.
func keepFlagged(items []session.Item, flags []bool) []session.Item {
	var out []session.Item
	for i, it := range items {
		if flags[i] {
			out = append(out, it)
		}
	}
	return out
}

func newMem(t *testing.T) *memory.Session {
	t.Helper()
	s, err := memory.NewSession("s")
	require.NoError(t, err)
	return s
}

func TestPairingWithNonFiniteTokens(t *testing.T) {
	items, err := session.ParseItems(
		`{"type":"function_call","score":NaN,"call_id":"a","arguments":"{}"}`,
		`{"type":"function_call_output","output":[Infinity,-Infinity],"call_id":"a","caller":{"x":NaN,"caller_id":"p"}}`,
	)
	require.NoError(t, err)
	require.Equal(t, []string{"function_call:a", "function_call_output:a"}, types(history.SafeWindow(items)))
	require.Empty(t, history.Diagnose(items))
}

// inputTypes stores rows in a memory session and returns the types of
// ModelInput's window of n.
func inputTypes(t *testing.T, rows []string, n int) []string {
	t.Helper()
	ctx := context.Background()
	s := newMem(t)
	items, err := session.ParseItems(rows...)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items))
	got, err := history.ModelInput(ctx, s, n)
	require.NoError(t, err)
	return types(got)
}

// TestLocalShellOutputPairsOnID: the API schema's local_shell_call_output
// names its call in "id" (the call's call_id), not in "call_id".
func TestLocalShellOutputPairsOnID(t *testing.T) {
	call := `{"type":"local_shell_call","id":"lsc_1","call_id":"call_1","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}}`
	schemaOutput := `{"type":"local_shell_call_output","id":"call_1","output":"a.txt"}`
	runtimeOutput := `{"type":"local_shell_call_output","id":"lso_1","call_id":"call_1","output":"a.txt"}`
	tests := []struct {
		name string
		rows []string
		n    int
		want []string
	}{
		{"the schema's shape pairs", []string{call, schemaOutput}, 2,
			[]string{"local_shell_call:call_1lsc_1", "local_shell_call_output:call_1"}},
		{"the Python runtime's shape pairs on call_id", []string{call, runtimeOutput}, 2,
			[]string{"local_shell_call:call_1lsc_1", "local_shell_call_output:call_1lso_1"}},
		{"a window cut between them drops the output", []string{call, schemaOutput}, 1, []string{}},
		{"an output of another call does not pair", []string{call, `{"type":"local_shell_call_output","id":"call_2","output":"x"}`}, 2, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, inputTypes(t, tc.rows, tc.n))
		})
	}
	items, err := session.ParseItems(call, schemaOutput)
	require.NoError(t, err)
	ck, ok := history.CallKey(items[0])
	require.True(t, ok)
	ak, ok := history.AnsweredKey(items[1])
	require.True(t, ok)
	require.Equal(t, ck, ak)
	require.Empty(t, history.Diagnose(items))
	require.Equal(t, []string{"local_shell_call:call_1lsc_1", "local_shell_call_output:call_1"}, types(history.SafeWindow(items)))
}
