package genkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/firebase/genkit/go/ai"
	aix "github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/ai/exp/localstore"
	"github.com/firebase/genkit/go/ai/exp/tool"
	"github.com/firebase/genkit/go/genkit"
	genkitx "github.com/firebase/genkit/go/genkit/exp"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/encrypted"
	genkitstore "github.com/agentsessions/sessions/integrations/genkit"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// The script, driven through genkit's own agent API as its users drive it:
// a prompt agent (genkit's DefineAgent) whose transfer tool needs the
// account holder's approval.
//
//   - Process 1 starts conversation "order-42" and asks for a transfer; the
//     model calls the tool, the tool interrupts; the process ends.
//   - Process 2 (a new genkit instance, the store reopened) resumes the
//     conversation by its session id, finds the interrupt in the latest
//     snapshot, and approves: the tool runs (once) and records the transfer
//     in the session's custom state; then one more turn; the process ends.
//   - Process 3 (again new) resumes by the last snapshot's id and asks one
//     more question.
//
// The fake model is registered in genkit and stateless: it answers from
// its request alone, as a real one does, and every request is recorded.

const (
	conversation = "order-42"
	agentName    = "banker"
	modelName    = "test/banker"
	systemPrompt = "You move money. Every transfer needs the account holder's approval."
)

type bankState struct {
	Transfers int     `json:"transfers"`
	Sent      float64 `json:"sent"`
}

type transferInput struct {
	ToAccount string  `json:"toAccount"`
	Amount    float64 `json:"amount"`
}

type transferOutput struct {
	Status string  `json:"status"`
	Amount float64 `json:"amount"`
}

type approvalRequest struct {
	Reason string  `json:"reason"`
	Amount float64 `json:"amount"`
}

type approval struct {
	Approved bool `json:"approved"`
}

// noConfig is the fake models' configuration: none.
type noConfig struct{}

// recorder keeps every model request, as JSON, across processes, and
// counts the transfers the tool made.
type recorder struct {
	mu       sync.Mutex
	requests [][]byte
	runs     int
}

func (r *recorder) record(req *ai.ModelRequest) {
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, b)
}

// answer is the fake model: a tool response gets a confirmation, a
// request to send money gets a tool call, anything else an echo with the
// length of the conversation it was given.
func answer(req *ai.ModelRequest) *ai.Message {
	last := req.Messages[len(req.Messages)-1]
	for _, p := range last.Content {
		if p.IsToolResponse() {
			out, _ := json.Marshal(p.ToolResponse.Output)
			return ai.NewModelTextMessage("Done: " + string(out))
		}
	}
	text := last.Text()
	if strings.Contains(text, "send") {
		return ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{
			Name: "transfer", Ref: "call-1", Input: map[string]any{"toAccount": "bob", "amount": 120},
		}))
	}
	return ai.NewModelTextMessage(fmt.Sprintf("You said %q; I was given %d messages.", text, len(req.Messages)))
}

// defineBanker is what an application does at start-up: a genkit
// instance, the model, the tool, and the agent over store. The process
// ends when t does or when the returned function is called (genkit.Init
// watches for signals until its context is done).
func defineBanker(t *testing.T, rec *recorder, store aix.SessionStore[bankState]) (*aix.Agent[bankState], func()) {
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	g := genkit.Init(ctx, genkit.WithExperimental())
	genkit.DefineModelAction(g, modelName, &ai.ModelOptions{
		Supports: &ai.ModelSupports{Multiturn: true, SystemRole: true, Tools: true},
	}, func(ctx context.Context, req *ai.ModelRequest, _ *noConfig, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		rec.record(req)
		msg := answer(req)
		if cb != nil {
			if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: msg.Content}); err != nil {
				return nil, err
			}
		}
		return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
	})
	transfer := genkitx.DefineInterruptibleTool(g, "transfer", "Transfers money to another account.",
		func(ctx context.Context, in transferInput, ok *approval) (*transferOutput, error) {
			if ok == nil {
				return nil, tool.Interrupt(approvalRequest{Reason: "approval", Amount: in.Amount})
			}
			if !ok.Approved {
				return &transferOutput{Status: "cancelled"}, nil
			}
			rec.mu.Lock()
			rec.runs++
			rec.mu.Unlock()
			if sess := aix.SessionFromContext[bankState](ctx); sess != nil {
				sess.UpdateCustom(func(s bankState) bankState {
					s.Transfers++
					s.Sent += in.Amount
					return s
				})
			}
			return &transferOutput{Status: "completed", Amount: in.Amount}, nil
		})
	return genkitx.DefineAgent(g, agentName, aix.InlinePrompt{
		ai.WithModelName(modelName),
		ai.WithSystem(systemPrompt),
		ai.WithTools(transfer),
	}, aix.WithSessionStore(store)), stop
}

// turn reads one turn's chunks up to its TurnEnd and returns the
// interrupts streamed and the TurnEnd.
func turn(t *testing.T, conn *aix.AgentConnection[bankState]) ([]*ai.Part, *aix.TurnEnd) {
	t.Helper()
	var interrupts []*ai.Part
	for chunk, err := range conn.Receive() {
		require.NoError(t, err)
		if mc := chunk.ModelChunk; mc != nil {
			for _, p := range mc.Content {
				if p.IsInterrupt() {
					interrupts = append(interrupts, p)
				}
			}
		}
		if chunk.TurnEnd != nil {
			return interrupts, chunk.TurnEnd
		}
	}
	t.Fatal("the stream ended without a TurnEnd")
	return nil, nil
}

// finish closes conn and returns its output, which must not have failed.
func finish(t *testing.T, conn *aix.AgentConnection[bankState]) *aix.AgentOutput[bankState] {
	t.Helper()
	require.NoError(t, conn.Close())
	out, err := conn.Output()
	require.NoError(t, err)
	require.Nil(t, out.Error, "the invocation failed")
	return out
}

// outcome is what a run of the script leaves: the model's requests, the
// final snapshot's state, and what the turns reported.
type outcome struct {
	requests [][]byte
	runs     int
	state    []byte
	reasons  []aix.AgentFinishReason
}

// runScript runs the script, calling open once per process for the store
// that process uses; close ends the process's use of it.
func runScript(t *testing.T, open func() (aix.SessionStore[bankState], func())) outcome {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}
	var reasons []aix.AgentFinishReason

	// Process 1: the ask; the tool interrupts.
	store, closeStore := open()
	agent, exit := defineBanker(t, rec, store)
	conn, err := agent.Connect(ctx, aix.WithSessionID[bankState](conversation))
	require.NoError(t, err)
	require.NoError(t, conn.SendText("please send 120 EUR to bob"))
	interrupts, end := turn(t, conn)
	require.Len(t, interrupts, 1, "the tool asks for approval")
	require.Equal(t, aix.AgentFinishReasonInterrupted, end.FinishReason)
	require.NotEmpty(t, end.SnapshotID, "the interrupted turn is snapshotted")
	reasons = append(reasons, end.FinishReason)
	out := finish(t, conn)
	require.Equal(t, conversation, out.SessionID)
	closeStore()
	exit()
	require.Zero(t, rec.runs, "nothing is transferred before the approval")

	// Process 2: a new genkit instance over the reopened store approves
	// the interrupt it finds in the conversation's latest snapshot.
	store, closeStore = open()
	agent, exit = defineBanker(t, rec, store)
	latest, err := agent.GetLatestSnapshot(ctx, conversation)
	require.NoError(t, err)
	require.Equal(t, end.SnapshotID, latest.SnapshotID, "the latest snapshot is the interrupted turn's")
	require.Equal(t, aix.AgentFinishReasonInterrupted, latest.FinishReason)
	msgs := latest.State.Messages
	var pending *ai.Part
	for _, p := range msgs[len(msgs)-1].Content {
		if p.IsInterrupt() {
			pending = p
		}
	}
	require.NotNil(t, pending, "the snapshot keeps the interrupted tool request")
	why, ok := tool.InterruptAs[approvalRequest](pending)
	require.True(t, ok)
	require.Equal(t, approvalRequest{Reason: "approval", Amount: 120}, why)
	restart, err := tool.Resume(pending, approval{Approved: true})
	require.NoError(t, err)

	conn, err = agent.Connect(ctx, aix.WithSessionID[bankState](conversation))
	require.NoError(t, err)
	require.NoError(t, conn.SendResume(&aix.ToolResume{Restart: []*ai.Part{restart}}))
	interrupts, end = turn(t, conn)
	require.Empty(t, interrupts)
	reasons = append(reasons, end.FinishReason)
	require.NoError(t, conn.SendText("thanks"))
	_, end = turn(t, conn)
	reasons = append(reasons, end.FinishReason)
	out = finish(t, conn)
	lastSnapshot := out.SnapshotID
	require.NotEmpty(t, lastSnapshot)
	closeStore()
	exit()
	require.Equal(t, 1, rec.runs, "the approved transfer runs once")

	// Process 3: resumes by snapshot id.
	store, closeStore = open()
	agent, exit = defineBanker(t, rec, store)
	conn, err = agent.Connect(ctx, aix.WithSnapshotID[bankState](lastSnapshot))
	require.NoError(t, err)
	require.NoError(t, conn.SendText("what did I do today?"))
	_, end = turn(t, conn)
	reasons = append(reasons, end.FinishReason)
	out = finish(t, conn)
	require.Equal(t, conversation, out.SessionID)
	final, err := agent.GetLatestSnapshot(ctx, conversation)
	require.NoError(t, err)
	require.Equal(t, out.SnapshotID, final.SnapshotID)
	require.Equal(t, lastSnapshot, final.ParentID, "the chain continues from the snapshot resumed")
	require.Equal(t, bankState{Transfers: 1, Sent: 120}, final.State.Custom)
	state, err := json.Marshal(final.State)
	require.NoError(t, err)
	closeStore()
	exit()

	return outcome{requests: rec.requests, runs: rec.runs, state: state, reasons: reasons}
}

// referenceRun is the script over genkit's own in-memory store, kept
// across the "restarts" (the only way it can be).
func referenceRun(t *testing.T) outcome {
	mem := localstore.NewInMemorySessionStore[bankState]()
	return runScript(t, func() (aix.SessionStore[bankState], func()) { return mem, func() {} })
}

// TestAgentAcrossRestartsAndInterrupt is the proof: the script over
// genkit's in-memory store and over ours on every backend (plain, and
// with encrypted sessions), a new genkit instance over a reopened store
// in each process; every model request and the final state are equal to
// the reference's.
func TestAgentAcrossRestartsAndInterrupt(t *testing.T) {
	defer logServers(t)
	ref := referenceRun(t)
	require.Len(t, ref.requests, 4, "the reference makes four model calls")
	require.Equal(t, 1, ref.runs)
	require.Equal(t, []aix.AgentFinishReason{aix.AgentFinishReasonInterrupted, aix.AgentFinishReasonStop, aix.AgentFinishReasonStop, aix.AgentFinishReasonStop}, ref.reasons)
	for _, b := range storetest.Backends() {
		for _, variant := range []string{"plain", "encrypted"} {
			t.Run(b.Name+"/"+variant, func(t *testing.T) {
				be := newBackend(t, b)
				opts := genkitstore.Options{SessionPrefix: "conv:"}
				got := runScript(t, func() (aix.SessionStore[bankState], func()) {
					st, closeFn := be.open(t)
					if variant == "encrypted" {
						s, err := genkitstore.NewFunc[bankState](func(id string) (session.Session, error) {
							ss, err := st.Session(id)
							if err != nil {
								return nil, err
							}
							return encrypted.New(ss, encrypted.Options{Keys: []encrypted.Key{{Secret: "genkit-integration-test-key"}}})
						}, opts)
						require.NoError(t, err)
						return s, closeFn
					}
					return newStore[bankState](t, st, opts), closeFn
				})
				require.Equal(t, ref.reasons, got.reasons)
				require.Equal(t, ref.runs, got.runs)
				require.Len(t, got.requests, len(ref.requests), "model calls")
				for i := range ref.requests {
					require.JSONEq(t, string(ref.requests[i]), string(got.requests[i]), "model request %d", i+1)
					t.Logf("%s %s: model request %d: %d bytes, equal to the in-memory run's: %v",
						b.Name, variant, i+1, len(got.requests[i]), string(ref.requests[i]) == string(got.requests[i]))
				}
				require.JSONEq(t, string(ref.state), string(got.state), "final state")
				t.Logf("%s %s: final state %d bytes, equal to the in-memory run's", b.Name, variant, len(got.state))

				// Where it is: the conversation's index beside nothing else,
				// the rows in sessions of their own, encrypted iff asked.
				st, closeFn := be.open(t)
				defer closeFn()
				ss, err := st.Session("conv:" + conversation)
				require.NoError(t, err)
				cs := ss.(session.CheckpointStore)
				names, err := cs.ListCheckpoints(context.Background())
				require.NoError(t, err)
				require.Equal(t, []string{genkitstore.IndexName}, names)
				raw, _, err := cs.LoadCheckpoint(context.Background(), genkitstore.IndexName)
				require.NoError(t, err)
				require.Equal(t, variant == "encrypted", strings.HasPrefix(string(raw), `{"__enc__"`), "stored as an envelope iff encrypted")
				items, err := ss.Items(context.Background())
				require.NoError(t, err)
				require.Empty(t, items, "the store writes no history items")
			})
		}
	}
}

// TestRestartIsReal is the control: over memory://, where every open is a
// new empty store, the same script cannot find the interrupted turn, so
// the script's resumes did depend on what the store kept.
func TestRestartIsReal(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	open := func() *genkitstore.Store[bankState] {
		st, err := adapters.Open(ctx, "memory://")
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return newStore[bankState](t, st, genkitstore.Options{})
	}
	agent, _ := defineBanker(t, rec, open())
	out, err := agent.RunText(ctx, "please send 120 EUR to bob", aix.WithSessionID[bankState](conversation))
	require.NoError(t, err)
	require.Equal(t, aix.AgentFinishReasonInterrupted, out.FinishReason)

	agent, _ = defineBanker(t, rec, open())
	latest, err := agent.GetLatestSnapshot(ctx, conversation)
	require.ErrorIs(t, err, aix.ErrSnapshotNotFound)
	require.Nil(t, latest)
	_, err = agent.Connect(ctx, aix.WithSnapshotID[bankState](out.SnapshotID))
	require.NoError(t, err, "Connect defers loading")
	out2, err := agent.RunText(ctx, "hello", aix.WithSnapshotID[bankState](out.SnapshotID))
	if err == nil {
		require.NotNil(t, out2.Error, "resuming a snapshot the store lost fails")
		err = out2.Error
	}
	require.ErrorContains(t, err, "not found")
	t.Logf("resume from a store that lost the snapshot: %v", err)
}
