package runstate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// TestSanitizeForConversations: the exported rules are the ones a Run
// saves to an ID-insensitive session with (Sanitize, Unpersistable),
// applied to a batch; applying them twice changes nothing more.
func TestSanitizeForConversations(t *testing.T) {
	in, err := session.ParseItems(
		`{"type":"function_call","id":"fc_1","call_id":"c1","provider_data":{"a":1},"_agents_tool_title":"t"}`,
		`{"type":"reasoning","summary":[]}`,
		`{"type":"reasoning","id":"rs_1","encrypted_content":"e"}`,
		`{"role":"assistant","id":"msg_1","content":"x"}`,
		`{ "role" : "user" , "content" : "kept as written" }`,
	)
	require.NoError(t, err)
	out, dropped := runstate.SanitizeForConversations(in)
	require.Equal(t, 1, dropped)
	require.Equal(t, []string{
		`{"type":"function_call","call_id":"c1"}`,
		`{"type":"reasoning","id":"rs_1","encrypted_content":"e"}`,
		`{"role":"assistant","content":"x"}`,
		`{ "role" : "user" , "content" : "kept as written" }`,
	}, strs(out))
	for i, it := range in {
		if i != 1 {
			require.Equal(t, runstate.Sanitize(it).String(), out[map[int]int{0: 0, 2: 1, 3: 2, 4: 3}[i]].String())
		}
	}
	again, dropped := runstate.SanitizeForConversations(out)
	require.Zero(t, dropped)
	require.Equal(t, strs(out), strs(again))
	require.Equal(t, `{"type":"function_call","id":"fc_1","call_id":"c1","provider_data":{"a":1},"_agents_tool_title":"t"}`, in[0].String(), "the input is not changed")
}
