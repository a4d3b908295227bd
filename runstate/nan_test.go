package runstate_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
)

// TestNonFiniteNumbersRoundTrip: Python's json.dumps writes NaN, Infinity
// and -Infinity for non-finite floats (in a tool output, in the run
// context), and json.loads reads them. A RunState document holding them
// loads, and is written back with them, as Python writes them; a literal
// beyond float64, which Python would write back as Infinity, is refused.
func TestNonFiniteNumbersRoundTrip(t *testing.T) {
	doc := fixture(t, "features/v1_19_held_pending_session_write.json")
	mod := bytes.Replace(doc, []byte(`"output": "wrote",`), []byte(`"output": "wrote", "score": NaN, "hi": Infinity, "lo": -Infinity, "s": "NaN Infinity",`), 1)
	mod = bytes.Replace(mod, []byte(`"context": {},`), []byte(`"context": {"temp": NaN, "list": [Infinity, -Infinity]},`), 1)
	require.NotEqual(t, doc, mod)
	cp, err := runstate.Load(mod)
	require.NoError(t, err)
	require.True(t, cp.HasHeld())
	out, err := cp.MarshalJSON()
	require.NoError(t, err)
	for _, want := range []string{`"score": NaN`, `"hi": Infinity`, `"lo": -Infinity`, `"s": "NaN Infinity"`, `"temp": NaN`, `Infinity,`, `-Infinity`} {
		require.Contains(t, string(out), want)
	}
	again, err := runstate.Load(out)
	require.NoError(t, err)
	out2, err := again.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(out), string(out2), "written back as it was read")

	_, err = runstate.Load(bytes.Replace(doc, []byte(`"max_turns": 10`), []byte(`"max_turns": 1e400`), 1))
	require.ErrorIs(t, err, runstate.ErrInvalidDocument)
	require.ErrorContains(t, err, "out of range")
}
