package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	einosession "github.com/cloudwego/eino/adk/session"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/eino/events"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// The script, in eino's session mode (RunnerConfig.SessionID and
// SessionStore): a ChatModelAgent whose transfer tool needs a human's
// approval. Turn 1 asks; the model calls the tool; the tool interrupts.
// Process 2 resumes the session with "later": the tool interrupts again.
// Process 3 approves: the tool runs once and the model answers. Process 4
// asks a follow-up: eino rebuilds the conversation from the session's
// events alone. Every "process" builds a new agent and Runner over stores
// opened anew (the same stores for memory://, where an open is a new store).

const (
	sessionID   = "conv-42"
	userAsk     = "send 100 EUR to bob"
	followUp    = "what did you just do?"
	instruction = "You move money. Every transfer needs the account holder's approval."
)

// recorder keeps every model input, as JSON, across Runners and restarts:
// the fake model is stateless (it decides from its input), as a real one.
type recorder struct {
	mu    sync.Mutex
	calls [][]byte
	tools []string // names of the tools offered, per call
	runs  int      // times the tool actually transferred
}

func (r *recorder) record(in []*schema.Message, tools []*schema.ToolInfo) {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, b)
	r.tools = append(r.tools, strings.Join(names, ","))
}

// fakeModel is eino's model.BaseChatModel: asked with no tool result yet,
// it calls transfer; given the tool's result, it answers; asked the
// follow-up, it answers from what the conversation holds.
type fakeModel struct{ rec *recorder }

func (m *fakeModel) answer(in []*schema.Message, opts []model.Option) *schema.Message {
	m.rec.record(in, model.GetCommonOptions(&model.Options{}, opts...).Tools)
	last := in[len(in)-1]
	switch {
	case last.Role == schema.Tool:
		return schema.AssistantMessage("Done: "+last.Content+".", nil)
	case last.Role == schema.User && last.Content == followUp:
		return schema.AssistantMessage("I remember "+strconv.Itoa(len(in))+" messages; the transfer was approved and made.", nil)
	}
	return schema.AssistantMessage("", []schema.ToolCall{{
		ID:       "call_1",
		Type:     "function",
		Function: schema.FunctionCall{Name: "transfer", Arguments: `{"amount":100,"currency":"EUR","to":"bob"}`},
	}})
}

func (m *fakeModel) Generate(_ context.Context, in []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	return m.answer(in, opts), nil
}

func (m *fakeModel) Stream(_ context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return schema.StreamReaderFromArray([]*schema.Message{m.answer(in, opts)}), nil
}

// transferTool interrupts for approval: the resume data is the human's
// decision ("approved", or "later" to ask again).
type transferTool struct{ rec *recorder }

func (transferTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{
		Name: "transfer",
		Desc: "Transfer money; needs the account holder's approval.",
		ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
			"amount":   {Type: schema.Integer, Required: true},
			"currency": {Type: schema.String, Required: true},
			"to":       {Type: schema.String, Required: true},
		}),
	}, nil
}

func (t transferTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	wasInterrupted, _, _ := tool.GetInterruptState[any](ctx)
	if !wasInterrupted {
		return "", tool.Interrupt(ctx, "approve transfer "+args+"?")
	}
	isTarget, hasData, decision := tool.GetResumeContext[string](ctx)
	if !isTarget || !hasData || decision != "approved" {
		return "", tool.Interrupt(ctx, "still waiting: approve transfer "+args+"?")
	}
	t.rec.mu.Lock()
	t.rec.runs++
	t.rec.mu.Unlock()
	return "transferred 100 EUR to bob", nil
}

// stores is what a process opens: the session event store, the checkpoint
// store (checkpoints, in memory, shared by the processes of a run as a
// durable store would be), and how to close them.
type stores struct {
	events adk.SessionEventStore[*schema.Message]
	cps    adk.CheckPointStore
	close  func()
}

// newRunner builds what a process builds at start: the agent and a Runner
// in session mode.
func newRunner(t *testing.T, rec *recorder, st stores, streaming bool) *adk.Runner {
	t.Helper()
	ctx := context.Background()
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "teller",
		Description: "moves money with approval",
		Instruction: instruction,
		Model:       &fakeModel{rec: rec},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{transferTool{rec: rec}}}},
	})
	require.NoError(t, err)
	return adk.NewRunner(ctx, adk.RunnerConfig{
		Agent:           agent,
		EnableStreaming: streaming,
		SessionID:       sessionID,
		SessionStore:    st.events,
		CheckPointStore: st.cps,
	})
}

// outcome drains a run: the root-cause interrupt's id if it interrupted,
// and the final assistant text otherwise.
func outcome(t *testing.T, iter *adk.AsyncIterator[*adk.AgentEvent]) (interruptID, final string) {
	t.Helper()
	for {
		ev, ok := iter.Next()
		if !ok {
			return interruptID, final
		}
		require.NoError(t, ev.Err)
		if ev.Action != nil && ev.Action.Interrupted != nil {
			for _, c := range ev.Action.Interrupted.InterruptContexts {
				if c.IsRootCause {
					interruptID = c.ID
				}
			}
			require.NotEmpty(t, interruptID, "an interrupt without a root cause")
			continue
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil {
			msg, err := ev.Output.MessageOutput.GetMessage()
			require.NoError(t, err)
			if msg.Role == schema.Assistant && len(msg.ToolCalls) == 0 {
				final = msg.Content
			}
		}
	}
}

// runScript runs the script, each step in a new "process" of open, and
// returns the recorder.
func runScript(t *testing.T, open func() stores, streaming bool) *recorder {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}

	st := open()
	id, final := outcome(t, newRunner(t, rec, st, streaming).Query(ctx, userAsk))
	_, parked, err := st.cps.Get(ctx, runnerCheckpointID)
	require.NoError(t, err)
	st.close()
	require.NotEmpty(t, id, "turn 1 interrupts for approval")
	require.Empty(t, final)
	require.True(t, parked, "the interrupt is checkpointed")

	for _, decision := range []string{"later", "approved"} {
		st = open()
		iter, err := newRunner(t, rec, st, streaming).ResumeWithParams(ctx, "", &adk.ResumeParams{Targets: map[string]any{id: decision}})
		require.NoError(t, err, "resume with %q", decision)
		nextID, final := outcome(t, iter)
		_, parked, err := st.cps.Get(ctx, runnerCheckpointID)
		require.NoError(t, err)
		st.close()
		require.Equal(t, decision == "later", parked, "a checkpoint while interrupted, none once done (the Runner deletes it through CheckPointDeleter)")
		if decision == "later" {
			require.NotEmpty(t, nextID, "asked later: interrupts again")
			require.Empty(t, final)
			id = nextID
		} else {
			require.Empty(t, nextID, "approved: completes")
			require.Equal(t, "Done: transferred 100 EUR to bob.", final)
		}
	}

	st = open()
	_, final = outcome(t, newRunner(t, rec, st, streaming).Query(ctx, followUp))
	st.close()
	require.Contains(t, final, "I remember")
	require.Equal(t, 1, rec.runs, "the tool transferred exactly once")
	return rec
}

// runnerCheckpointID is the checkpoint id eino v0.10's Runner uses for a
// session's interrupt when Resume is given none ("session/" + id +
// "/runner_checkpoint").
const runnerCheckpointID = "session/" + sessionID + "/runner_checkpoint"

// uuids matches the ids eino draws at random (message ids, event ids).
var uuids = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normalize replaces each distinct UUID of a run's model inputs by its
// rank of first appearance in that run, so that two runs compare equal
// when their ids differ only in the random draw, and not otherwise (the
// same id in two places stays one id).
func normalize(calls [][]byte) [][]byte {
	seen := map[string]string{}
	out := make([][]byte, len(calls))
	for i, c := range calls {
		out[i] = uuids.ReplaceAllFunc(c, func(u []byte) []byte {
			r, ok := seen[string(u)]
			if !ok {
				r = "uuid-" + strconv.Itoa(len(seen)+1)
				seen[string(u)] = r
			}
			return []byte(r)
		})
	}
	return out
}

// reference runs the script over eino's own in-memory store
// (adk/session.InMemoryStore, both the session store and the checkpoint
// store), kept across the "restarts": the model input eino itself gives.
func reference(t *testing.T, streaming bool) (*recorder, []string) {
	mem := einosession.NewInMemoryStore[*schema.Message](nil)
	rec := runScript(t, func() stores { return stores{events: mem, cps: mem, close: func() {}} }, streaming)
	res, err := mem.LoadEvents(context.Background(), sessionID, nil)
	require.NoError(t, err)
	kinds := make([]string, len(res.Events))
	for i, e := range res.Events {
		kinds[i] = string(e.Kind)
	}
	return rec, kinds
}

// TestADKSessionAcrossRestarts is the proof: the same script over eino's
// in-memory store and over ours on every backend, everything reopened and
// a new Runner built between steps; the model's input on every call is
// the reference's (byte for byte once eino's random ids are numbered).
func TestADKSessionAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	for _, streaming := range []bool{false, true} {
		mode := map[bool]string{false: "generate", true: "stream"}[streaming]
		ref, refKinds := reference(t, streaming)
		require.Len(t, ref.calls, 3, "the script makes three model calls (the \"later\" resume makes none)")
		want := normalize(ref.calls)
		for _, b := range storetest.Backends() {
			t.Run(mode+"/"+b.Name, func(t *testing.T) {
				u := b.URL(t)
				cps := newCheckpoints()
				var shared adapters.Store
				if !b.Peer {
					var err error
					shared, err = adapters.Open(ctx, u)
					require.NoError(t, err)
					t.Cleanup(func() { _ = shared.Close() })
				}
				open := func() stores {
					st := shared
					closeFn := func() {}
					if st == nil {
						var err error
						st, err = adapters.Open(ctx, u)
						require.NoError(t, err)
						closeFn = func() { require.NoError(t, st.Close()) }
					}
					evs, err := events.New[*schema.Message](st, events.Options{Prefix: "eino-events:"})
					require.NoError(t, err)
					return stores{events: evs, cps: cps, close: closeFn}
				}
				got := runScript(t, open, streaming)
				require.Len(t, got.calls, len(ref.calls), "model calls")
				have := normalize(got.calls)
				for i := range want {
					eq := bytes.Equal(want[i], have[i]) && ref.tools[i] == got.tools[i]
					t.Logf("%s %s: model call %d: %d messages, %d bytes, tools [%s]: equal to eino's in-memory store: %v",
						mode, b.Name, i+1, countMessages(t, have[i]), len(have[i]), got.tools[i], eq)
					require.Equal(t, string(want[i]), string(have[i]), "model input, call %d", i+1)
					require.Equal(t, ref.tools[i], got.tools[i], "tools, call %d", i+1)
				}

				st := shared
				if st == nil {
					var err error
					st, err = adapters.Open(ctx, u)
					require.NoError(t, err)
					defer st.Close()
				}
				s, err := st.Session("eino-events:" + sessionID)
				require.NoError(t, err)
				items, err := session.All(ctx, s)
				require.NoError(t, err)
				kinds := make([]string, len(items))
				for i, it := range items {
					require.Equal(t, events.ItemType, it.Type())
					kinds[i], _ = it.StringField("kind")
				}
				t.Logf("%s %s: the session holds %d events (eino's in-memory store: %d)", mode, b.Name, len(items), len(refKinds))
				if !streaming {
					require.Equal(t, refKinds, kinds, "the events stored, by kind")
				}
				// Streaming, eino itself persists the first model call's
				// span.model_request_end or not, by timing (21 or 22 events
				// in its in-memory store too).
			})
		}
	}
}

func countMessages(t *testing.T, b []byte) int {
	var v []json.RawMessage
	require.NoError(t, json.Unmarshal(b, &v))
	return len(v)
}

// TestRestartIsReal is the control: with a session store that loses
// everything at each restart (memory:// opened anew), the follow-up's
// model input lacks the conversation, so the comparison above does catch
// a store that does not keep the events.
func TestRestartIsReal(t *testing.T) {
	ctx := context.Background()
	rec, _ := reference(t, false)
	ref := normalize(rec.calls)
	cps := einosession.NewInMemoryStore[*schema.Message](nil) // checkpoints survive
	got := runScript(t, func() stores {
		st, err := adapters.Open(ctx, "memory://")
		require.NoError(t, err)
		evs, err := events.New[*schema.Message](st, events.Options{})
		require.NoError(t, err)
		return stores{events: evs, cps: cps, close: func() { _ = st.Close() }}
	}, false)
	have := normalize(got.calls)
	require.Len(t, have, len(ref))
	require.Equal(t, string(ref[0]), string(have[0]), "turn 1 starts from nothing either way")
	require.NotEqual(t, string(ref[2]), string(have[2]), "the follow-up")
	t.Logf("follow-up over a store that lost the events: %d messages, against %d", countMessages(t, have[2]), countMessages(t, ref[2]))
}
