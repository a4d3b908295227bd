package runstate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// TestWrapSaveBeforeAppend: the document saved just before the append holds
// the registered record with its tail digests, so a process killed during
// the append leaves what Resume needs; a failing save stops the append.
func TestWrapSaveBeforeAppend(t *testing.T) {
	ctx := context.Background()
	s, err := memory.NewSession("s1")
	require.NoError(t, err)
	cp := runstate.New()
	cp.SetStep(runstate.StepRunAgain)
	var saved [][]byte
	ds := cp.WrapSaveBeforeAppend(s, func(doc []byte) error { saved = append(saved, doc); return nil })
	require.Equal(t, session.Probe(s), session.Probe(ds), "capabilities pass through")
	_, err = cp.Save(ctx, ds, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
	require.NoError(t, err)
	require.Len(t, saved, 1, "one save, before the one append")
	mid, err := runstate.Load(saved[0])
	require.NoError(t, err)
	require.NotNil(t, mid.Pending, "the saved document holds the record")
	require.NotNil(t, mid.Pending.Before, "with its tail digests")
	_, err = mid.Resume(ctx, s)
	require.NoError(t, err, "resuming the mid-append document accepts the committed batch")
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2, "and appends nothing twice")

	boom := errors.New("disk full")
	fail := cp.WrapSaveBeforeAppend(s, func([]byte) error { return boom })
	_, err = cp.Save(ctx, fail, runstate.SaveArgs{NewItems: items(call("c2"), output("c2")), Register: true})
	require.ErrorIs(t, err, boom)
	all, err = s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2, "nothing appended when the checkpoint could not be saved")
	require.NotNil(t, cp.Pending, "the record stays on the checkpoint for Resume")
	want, err := history.Digests(all, false)
	require.NoError(t, err)
	require.Equal(t, want, cp.Pending.Before, "with the tail digests computed before Save returned")
}
