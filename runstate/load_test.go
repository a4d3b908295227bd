package runstate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
)

func TestFixturesLoadAndRoundTripByteForByte(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			raw := fixture(t, name)
			cp, err := runstate.Load(raw)
			require.NoError(t, err)
			out, err := cp.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, canonical(t, raw), canonical(t, out), "structurally identical")
			assert.Equal(t, string(raw), string(out), "byte-identical")
		})
	}
}
