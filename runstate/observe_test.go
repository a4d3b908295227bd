package runstate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/runstate"
)

// TestObserverSeesSettlesAndRecoveries: an append, a lost acknowledgement
// accepted by recovery, and a held batch settled at entry.
func TestObserverSeesSettlesAndRecoveries(t *testing.T) {
	var got []runstate.EventKind
	octx := runstate.WithObserver(context.Background(), func(_ context.Context, e runstate.Event) {
		require.Equal(t, "s1", e.SessionID)
		require.Positive(t, e.Items)
		got = append(got, e.Kind)
	})
	s, err := memory.NewSession("s1")
	require.NoError(t, err)

	cp := runstate.New()
	cp.SetStep(runstate.StepRunAgain)
	var mid []byte
	ds := cp.WrapSaveBeforeAppend(s, func(doc []byte) error { mid = doc; return nil })
	_, err = cp.Save(octx, ds, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
	require.NoError(t, err)
	again, err := runstate.Load(mid) // the checkpoint as a kill mid-append left it
	require.NoError(t, err)
	_, err = again.Resume(octx, s)
	require.NoError(t, err)

	held := runstate.New()
	held.SetStep(runstate.StepInterruption)
	require.NoError(t, held.Park(s, items(call("c2"), output("c2")), runstate.ParkOptions{}))
	held.SetStep(runstate.StepRunAgain)
	_, err = held.Resume(octx, s)
	require.NoError(t, err)

	require.Equal(t, []runstate.EventKind{
		runstate.EventAppended, runstate.EventLostAckAccepted, runstate.EventAppended, runstate.EventHeldSettled,
	}, got)
}
