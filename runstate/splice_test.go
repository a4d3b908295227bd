package runstate_test

import (
	"encoding/json"
	"testing"

	"github.com/agentsessions/sessions/runstate"
	"github.com/stretchr/testify/require"
)

// The Run's member spliced into a laid-out document is the document laid
// out with it, on every fixture and on documents whose keys sort around it.
func TestSpliceMemberIsTheLayout(t *testing.T) {
	run := json.RawMessage(`{"claims":{"c1":{"at":"2026-12-06T00:00:00Z","by":"h:1","token":"T"}},"response_id":"resp_\u00e9","turn_open":true}`)
	docs := [][]byte{
		[]byte(`{"$schemaVersion":"1.17","current_step":null}`),
		[]byte(`{"$schemaVersion":"1.17","a":1,"agents":[],"agentsessions_ru":{},"b":{"x":[1,2]},"current_step":null}`),
	}
	for _, name := range fixtureNames {
		docs = append(docs, fixture(t, name))
	}
	tried := 0
	for _, doc := range docs {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(doc, &m))
		delete(m, "agentsessions_run")
		base, err := json.Marshal(m)
		require.NoError(t, err)
		laid, err := runstate.PythonLayout(base)
		require.NoError(t, err)
		m["agentsessions_run"] = run
		full, err := json.Marshal(m)
		require.NoError(t, err)
		want, err := runstate.PythonLayout(full)
		require.NoError(t, err)
		got, ok := runstate.SpliceMember(laid, "agentsessions_run", run)
		if !ok {
			continue
		}
		tried++
		require.Equal(t, string(want), string(got))
	}
	require.Equal(t, len(docs), tried, "every document had a key after the member")
}
