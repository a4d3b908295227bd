package history_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// issueHistory is the history of issue 20: a reasoning item before an
// assistant message, then one before a function call and its output.
var issueHistory = []string{
	`{"role":"user","content":"first"}`,
	`{"type":"reasoning","id":"rs_1","summary":[]}`,
	`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}`,
	`{"role":"user","content":"second"}`,
	`{"type":"reasoning","id":"rs_2","summary":[]}`,
	`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}"}`,
	`{"type":"function_call_output","call_id":"call_1","output":"ok"}`,
}

// TestModelInputReasoningPairing: a reasoning item stays with the items it
// precedes in its response. A window never starts on an item whose
// reasoning item fell outside it (the API: "Item 'fc_1' of type
// 'function_call' was provided without its required 'reasoning' item"),
// and never holds a reasoning item without the item after it ("'reasoning'
// was provided without its required following item").
func TestModelInputReasoningPairing(t *testing.T) {
	tests := []struct {
		name string
		rows []string
		n    int
		want []string
	}{
		{"issue: a window of 5 starts on msg_1 without rs_1", issueHistory, 5,
			[]string{":", "reasoning:rs_2", "function_call:call_1fc_1", "function_call_output:call_1"}},
		{"issue: a window of 2 starts on fc_1 without rs_2", issueHistory, 2, []string{}},
		{"issue: a window of 1 is fc_1's output alone", issueHistory, 1, []string{}},
		{"issue: a window of 3 starts on rs_2", issueHistory, 3,
			[]string{"reasoning:rs_2", "function_call:call_1fc_1", "function_call_output:call_1"}},
		{"issue: a window of 4 starts on the user message", issueHistory, 4,
			[]string{":", "reasoning:rs_2", "function_call:call_1fc_1", "function_call_output:call_1"}},
		{"issue: a window of 6 starts on rs_1", issueHistory, 6,
			[]string{"reasoning:rs_1", "message:msg_1", ":", "reasoning:rs_2", "function_call:call_1fc_1", "function_call_output:call_1"}},
		{"issue: the whole history", issueHistory, math.MaxInt,
			[]string{":", "reasoning:rs_1", "message:msg_1", ":", "reasoning:rs_2", "function_call:call_1fc_1", "function_call_output:call_1"}},
		{
			name: "a trailing reasoning item with nothing after it goes",
			rows: []string{`{"role":"user","content":"q"}`, `{"type":"reasoning","id":"rs_1"}`},
			n:    10,
			want: []string{":"},
		},
		{
			name: "a reasoning item followed by a user message goes",
			rows: []string{`{"role":"user","content":"q"}`, `{"type":"reasoning","id":"rs_1"}`, `{"type":"message","role":"user","content":"again"}`},
			n:    10,
			want: []string{":", "message:"},
		},
		{
			name: "a reasoning item whose call is dropped takes the rest of its response with it",
			rows: []string{
				`{"role":"user","content":"q"}`,
				`{"type":"reasoning","id":"rs_1"}`,
				`{"type":"function_call","id":"fc_a","call_id":"a"}`,
				`{"type":"function_call","id":"fc_b","call_id":"b"}`,
				`{"type":"function_call_output","call_id":"b","output":"1"}`,
			},
			n:    10,
			want: []string{":"},
		},
		{
			name: "a computer call cut from its reasoning item",
			rows: []string{
				`{"role":"user","content":"q"}`,
				`{"type":"reasoning","id":"rs_1"}`,
				`{"type":"computer_call","id":"cu_1","call_id":"c1","action":{"type":"screenshot"}}`,
				`{"type":"computer_call_output","call_id":"c1","output":{"type":"computer_screenshot"}}`,
				`{"type":"message","id":"msg_1","role":"assistant","content":"done"}`,
			},
			n:    3,
			want: []string{},
		},
		{
			name: "hosted calls and the message after them, cut from their reasoning item",
			rows: []string{
				`{"role":"developer","content":"be brief"}`,
				`{"type":"reasoning","id":"rs_1"}`,
				`{"type":"web_search_call","id":"ws_1","status":"completed"}`,
				`{"type":"mcp_call","id":"mcp_1","name":"x","server_label":"s","arguments":"{}"}`,
				`{"type":"message","id":"msg_1","role":"assistant","content":"done"}`,
				`{"role":"user","content":"next"}`,
			},
			n:    4,
			want: []string{":"},
		},
		{
			name: "without reasoning items a window keeps its head",
			rows: []string{
				`{"role":"user","content":"q"}`,
				`{"type":"function_call","call_id":"a"}`,
				`{"type":"function_call_output","call_id":"a","output":"1"}`,
				`{"type":"message","role":"assistant","content":"done"}`,
			},
			n:    3,
			want: []string{"function_call:a", "function_call_output:a", "message:"},
		},
		{
			name: "a reasoning item far before the window still owns its head",
			rows: append([]string{`{"role":"user","content":"q"}`, `{"type":"reasoning","id":"rs_1"}`},
				callPairs(40)...),
			n:    4,
			want: []string{},
		},
		{
			name: "a user message far before the window: the head stays",
			rows: append([]string{`{"role":"user","content":"q"}`}, callPairs(40)...),
			n:    4,
			want: []string{"function_call:c38", "function_call_output:c38", "function_call:c39", "function_call_output:c39"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, inputTypes(t, tc.rows, tc.n))
		})
	}
}

// callPairs returns n function call/output pairs, c0 to c(n-1).
func callPairs(n int) []string {
	var out []string
	for i := range n {
		id := "c" + itoa(i)
		out = append(out,
			`{"type":"function_call","call_id":"`+id+`","name":"f","arguments":"{}"}`,
			`{"type":"function_call_output","call_id":"`+id+`","output":"ok"}`)
	}
	return out
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// TestAllIsTheWholeHistory: All is the window of every item, for
// ModelInput and Window alike.
func TestAllIsTheWholeHistory(t *testing.T) {
	ctx := context.Background()
	s := newMem(t)
	items, err := session.ParseItems(issueHistory...)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items))
	got, err := history.ModelInput(ctx, s, history.All)
	require.NoError(t, err)
	require.Equal(t, items, got)
	win, err := history.Window(items, history.All)
	require.NoError(t, err)
	require.Equal(t, items, win)
	_, err = history.ModelInput(ctx, s, -1)
	require.ErrorIs(t, err, session.ErrInvalidLimit)
	_, err = history.Window(items, -1)
	require.ErrorIs(t, err, session.ErrInvalidLimit)
	got, err = history.ModelInput(ctx, s, 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

// countingSession counts the reads of the session it wraps.
type countingSession struct {
	session.Session
	reads []int
}

func (c *countingSession) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	c.reads = append(c.reads, n)
	return session.Latest(ctx, c.Session, n)
}

// TestModelInputReadsBackOnlyWhenItMust: one read of n+1 items tells
// whether the window starts inside a response, unless the item before it
// is itself inside one; then ModelInput reads back (doubling) to the
// nearest reasoning item or user message.
func TestModelInputReadsBackOnlyWhenItMust(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		rows  []string
		n     int
		reads []int
		want  int
	}{
		{"the window holds everything", issueHistory, 50, []int{51}, 7},
		{"the item before the window is a user message", issueHistory, 3, []int{4}, 3},
		{"the window starts on a reasoning item", issueHistory, 6, []int{7}, 6},
		{"the item before the window is the reasoning item", issueHistory, 2, []int{3}, 0},
		{"forty call pairs after a reasoning item", append([]string{`{"role":"user","content":"q"}`, `{"type":"reasoning","id":"rs_1"}`}, callPairs(40)...),
			4, []int{5, 10, 20, 40, 80, 160}, 0},
		{"forty call pairs after a user message", append([]string{`{"role":"user","content":"q"}`}, callPairs(40)...),
			4, []int{5, 10, 20, 40, 80, 160}, 4},
		{"All", issueHistory, history.All, []int{history.All}, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items, err := session.ParseItems(tc.rows...)
			require.NoError(t, err)
			s := &countingSession{Session: newMem(t)}
			require.NoError(t, s.AddItems(ctx, items))
			got, err := history.ModelInput(ctx, s, tc.n)
			require.NoError(t, err)
			require.Len(t, got, tc.want)
			require.Equal(t, tc.reads, s.reads)
			win, err := history.Window(items, tc.n)
			require.NoError(t, err)
			require.Equal(t, got, win)
		})
	}
}
