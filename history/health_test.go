package history_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func TestDiagnoseAndRepair(t *testing.T) {
	items, err := session.ParseItems(
		`{"role":"user","content":"q"}`,
		`{"type":"function_call_output","call_id":"lost","output":"x"}`,
		`{"type":"function_call","call_id":"a"}`,
		`{"type":"function_call_output","call_id":"a","output":"1"}`,
		`{"type":"function_call_output","call_id":"a","output":"again"}`,
		`{"type":"shell_call_output","call_id":"b"}`,
		`{"type":"shell_call","call_id":"b"}`,
		`{"type":"mcp_approval_request","id":"r1"}`,
		`{"type":"reasoning","id":"rs"}`,
		`{"type":"function_call","call_id":"pending"}`,
	)
	require.NoError(t, err)
	ps := history.Diagnose(items)
	kinds := map[int]history.ProblemKind{}
	for _, p := range ps {
		kinds[p.Index] = p.Kind
	}
	require.Equal(t, map[int]history.ProblemKind{
		1: history.ProblemOrphanOutput,
		4: history.ProblemDuplicateOutput,
		5: history.ProblemOrphanOutput, // output before its call
		6: history.ProblemUnansweredCall,
		9: history.ProblemUnansweredCall,
	}, kinds)

	fixed, removed := history.RepairHistory(items, false)
	require.Len(t, removed, 3)
	require.Len(t, fixed, 7)
	for _, p := range history.Diagnose(fixed) {
		require.False(t, p.Kind.Severe(), "a repaired history has no severe problem: %+v", p)
	}
	fixed, removed = history.RepairHistory(items, true)
	require.Len(t, removed, 5)
	require.Equal(t, []string{":", "function_call:a", "function_call_output:a", "mcp_approval_request:r1"}, types(fixed),
		"the reasoning item before a dropped call goes with it")
	require.Empty(t, history.Diagnose(fixed))
}
