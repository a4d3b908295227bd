package genkit_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	aix "github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/ai/exp/localstore"
	"github.com/firebase/genkit/go/genkit"
	genkitx "github.com/firebase/genkit/go/genkit/exp"
	"github.com/stretchr/testify/require"

	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
)

// slowAgent's model runs until its context is cancelled, and reports when
// it starts and when it is cancelled.
func slowAgent(t *testing.T, store aix.SessionStore[bankState]) (agent *aix.Agent[bankState], started, cancelled chan struct{}) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	g := genkit.Init(ctx, genkit.WithExperimental())
	started, cancelled = make(chan struct{}, 1), make(chan struct{}, 1)
	genkit.DefineModelAction(g, "test/slow", &ai.ModelOptions{Supports: &ai.ModelSupports{Multiturn: true, SystemRole: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ *noConfig, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- struct{}{}
			return nil, ctx.Err()
		})
	agent = genkitx.DefineAgent(g, "worker", aix.InlinePrompt{
		ai.WithModelName("test/slow"),
		ai.WithSystem("Work."),
	}, aix.WithSessionStore(store))
	return agent, started, cancelled
}

func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// detachAndAbort detaches a long turn in one process and aborts it from
// another: the worker sees the abort (through the store's status
// subscription), stops, and its finalize keeps the abort. It returns the
// settled snapshot as the second process reads it.
func detachAndAbort(t *testing.T, worker, client aix.SessionStore[bankState]) *aix.SessionSnapshot[bankState] {
	ctx := context.Background()
	agent, started, cancelled := slowAgent(t, worker)
	conn, err := agent.Connect(ctx, aix.WithSessionID[bankState]("job-1"))
	require.NoError(t, err)
	require.NoError(t, conn.Send(&aix.AgentInput{Message: ai.NewUserTextMessage("a long job"), Detach: true}))
	out, err := conn.Output()
	require.NoError(t, err)
	require.Equal(t, aix.AgentFinishReasonDetached, out.FinishReason)
	require.NotEmpty(t, out.SnapshotID)
	within(t, started, "the detached turn to call the model")

	other, _, _ := slowAgent(t, client)
	snap, err := other.GetSnapshot(ctx, out.SnapshotID)
	require.NoError(t, err)
	require.Equal(t, aix.SnapshotStatusPending, snap.Status, "the other process sees the pending row")
	latest, err := other.GetLatestSnapshot(ctx, "job-1")
	require.NoError(t, err)
	require.Equal(t, out.SnapshotID, latest.SnapshotID)

	st, err := other.Abort(ctx, out.SnapshotID)
	require.NoError(t, err)
	require.Equal(t, aix.SnapshotStatusAborted, st)
	within(t, cancelled, "the worker to see the abort and cancel the model call")

	deadline := time.Now().Add(20 * time.Second)
	for {
		snap, err = other.GetSnapshot(ctx, out.SnapshotID)
		require.NoError(t, err)
		if snap.FinishReason == aix.AgentFinishReasonAborted || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, aix.SnapshotStatusAborted, snap.Status)
	require.Equal(t, aix.AgentFinishReasonAborted, snap.FinishReason, "the worker's finalize stamped the abort")
	require.Nil(t, snap.HeartbeatAt)
	st, err = other.Abort(ctx, out.SnapshotID)
	require.NoError(t, err)
	require.Equal(t, aix.SnapshotStatusAborted, st, "a second abort finds it settled")
	return snap
}

// settled is the snapshot's JSON without what differs from run to run
// (ids, times).
func settled(t *testing.T, s *aix.SessionSnapshot[bankState]) string {
	c := *s
	c.SnapshotID, c.ParentID = "", ""
	c.CreatedAt, c.UpdatedAt = time.Time{}, time.Time{}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return string(b)
}

// TestDetachAbortAcrossProcesses: genkit's detach and abort, the worker
// and the aborting client in two processes (two genkit instances, two
// clients of the backend): what genkit's in-memory store can do only
// within one process. The settled snapshot matches the in-memory run's.
func TestDetachAbortAcrossProcesses(t *testing.T) {
	mem := localstore.NewInMemorySessionStore[bankState]()
	ref := detachAndAbort(t, mem, mem)
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			be := newBackend(t, b)
			st1, close1 := be.open(t)
			defer close1()
			st2, close2 := be.open(t)
			defer close2()
			opts := genkitstore.Options{PollInterval: 20 * time.Millisecond}
			got := detachAndAbort(t, newStore[bankState](t, st1, opts), newStore[bankState](t, st2, opts))
			require.JSONEq(t, settled(t, ref), settled(t, got))
			t.Logf("%s: settled %s, as in memory", b.Name, settled(t, got))
		})
	}
}
