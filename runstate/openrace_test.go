package runstate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// staleLoad is a process whose read of the checkpoint is overtaken: after
// its first LoadCheckpoint returns, another process's step (then) lands.
type staleLoad struct {
	*memory.Session
	then func()
}

func (s *staleLoad) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	doc, v, err := s.Session.LoadCheckpoint(ctx, name)
	if then := s.then; then != nil {
		s.then = nil
		then()
	}
	return doc, v, err
}

// Open that recovers from a checkpoint another process settles at the same
// moment (the held batch whose approvals all came back) reads the stored
// checkpoint again instead of failing with the other's conflict: the
// caller did nothing yet. Seen as an approver process failing at Open in
// TestTwoApproversAtOnce under CI's load.
func TestOpenOvertakenBySettle(t *testing.T) {
	ctx := context.Background()
	mem, err := memory.New(memory.Options{}).Session("conv")
	require.NoError(t, err)
	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
	a, err := runstate.Open(ctx, mem, opts)
	require.NoError(t, err)
	require.NoError(t, a.Input(ctx, userMsg("u1")))
	require.NoError(t, a.Interrupt(ctx, "resp_1", items(fnCall("c1")), "c1"))
	a, err = runstate.Open(ctx, mem, opts)
	require.NoError(t, err)
	require.NoError(t, a.Claim(ctx, "c1"))
	require.NoError(t, a.Output(ctx, fnOutput("c1", "done")))

	b := &staleLoad{Session: mem, then: func() { require.NoError(t, a.Settle(ctx)) }}
	run, err := runstate.Open(ctx, b, opts)
	require.NoError(t, err, "Open overtaken by the other's settle")
	require.Equal(t, runstate.NextModel, run.Next().Kind)
	got, err := session.All(ctx, mem)
	require.NoError(t, err)
	require.Len(t, got, 3, "the call and its output landed once: %v", got)
}
