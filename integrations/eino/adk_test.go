package eino_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/encrypted"
	einostore "github.com/agentsessions/sessions/integrations/eino"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// The script: a ChatModelAgent whose transfer tool needs a human's
// approval. Run 1 asks; the model calls the tool; the tool interrupts.
// Run 2 (a new Runner, the store reopened) answers "later": the tool
// interrupts again. Run 3 (again a new Runner over a reopened store)
// approves: the tool runs once, the model answers. The app then deletes the
// consumed checkpoint through eino's CheckPointDeleter where it is asked
// to (or the store's DeleteOnGet has already done so).

const (
	checkPointID = "order-42"
	userAsk      = "send 100 EUR to bob"
	instruction  = "You move money. Every transfer needs the account holder's approval."
)

// recorder keeps every model input, as JSON, across Runners and restarts:
// the fake model is stateless (it decides from its input), as a real one.
type recorder struct {
	mu    sync.Mutex
	calls [][]byte
	tools []string // names of the tools bound, per call
	runs  int      // times the tool actually transferred
}

func (r *recorder) record(in []*schema.Message, tools []string) {
	b, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, b)
	r.tools = append(r.tools, strings.Join(tools, ","))
}

// fakeModel implements eino's model.ToolCallingChatModel: asked with no
// tool result yet, it calls transfer; given the tool's result, it answers.
type fakeModel struct {
	rec   *recorder
	tools []string
}

func (m *fakeModel) answer(in []*schema.Message) *schema.Message {
	m.rec.record(in, m.tools)
	last := in[len(in)-1]
	if last.Role == schema.Tool {
		return schema.AssistantMessage("Done: "+last.Content+".", nil)
	}
	return schema.AssistantMessage("", []schema.ToolCall{{
		ID:       "call_1",
		Type:     "function",
		Function: schema.FunctionCall{Name: "transfer", Arguments: `{"amount":100,"currency":"EUR","to":"bob"}`},
	}})
}

func (m *fakeModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	return m.answer(in), nil
}

func (m *fakeModel) Stream(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return schema.StreamReaderFromArray([]*schema.Message{m.answer(in)}), nil
}

func (m *fakeModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return &fakeModel{rec: m.rec, tools: names}, nil
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

// newRunner builds what a process builds at start: the agent and a Runner
// over the checkpoint store.
func newRunner(t *testing.T, rec *recorder, store adk.CheckPointStore, streaming bool) *adk.Runner {
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
	return adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, EnableStreaming: streaming, CheckPointStore: store})
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

// phase opens the checkpoint store as a new process would and returns it
// with its close; check reports what is stored after each run.
type harness struct {
	open      func() (adk.CheckPointStore, func())
	check     func(t *testing.T, afterRun int)
	appDelete bool // the app deletes the consumed checkpoint (CheckPointDeleter)
	streaming bool
}

// runScript runs the script and returns the recorder.
func runScript(t *testing.T, h harness) *recorder {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}

	store, closeStore := h.open()
	id, final := outcome(t, newRunner(t, rec, store, h.streaming).Query(ctx, userAsk, adk.WithCheckPointID(checkPointID)))
	require.NotEmpty(t, id, "run 1 interrupts for approval")
	require.Empty(t, final)
	closeStore()
	h.check(t, 1)

	for run, decision := range []string{"later", "approved"} {
		store, closeStore = h.open()
		iter, err := newRunner(t, rec, store, h.streaming).ResumeWithParams(ctx, checkPointID, &adk.ResumeParams{Targets: map[string]any{id: decision}})
		require.NoError(t, err)
		nextID, final := outcome(t, iter)
		if decision == "later" {
			require.NotEmpty(t, nextID, "run 2 interrupts again")
			require.Empty(t, final)
			id = nextID
		} else {
			require.Empty(t, nextID, "run 3 completes")
			require.Equal(t, "Done: transferred 100 EUR to bob.", final)
			if d, ok := store.(einostore.Deleter); ok && h.appDelete {
				require.NoError(t, d.Delete(ctx, checkPointID))
			}
		}
		closeStore()
		h.check(t, run+2)
	}
	require.Equal(t, 1, rec.runs, "the tool transferred exactly once")
	return rec
}

// mapStore is the in-memory CheckPointStore eino's own tests and examples
// use: a map.
type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok, nil
}

func (s *mapStore) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = append([]byte(nil), b...)
	return nil
}

func (s *mapStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

func referenceRun(t *testing.T, streaming bool) *recorder {
	ms := &mapStore{m: map[string][]byte{}}
	return runScript(t, harness{
		open:      func() (adk.CheckPointStore, func()) { return ms, func() {} },
		appDelete: true,
		streaming: streaming,
		check: func(t *testing.T, afterRun int) {
			_, ok := ms.m[checkPointID]
			require.Equal(t, afterRun < 3, ok, "map store after run %d", afterRun)
		},
	})
}

// openBackend opens b's store at u, skipping when its sessions keep no
// checkpoints yet.
func openBackend(t *testing.T, b storetest.Backend, u string) adapters.Store {
	t.Helper()
	st, err := adapters.Open(context.Background(), u)
	require.NoError(t, err, "open %s", b.Name)
	if !st.Declared().Has(session.CapCheckpoints) {
		_ = st.Close()
		_, err := einostore.New(st)
		require.ErrorIs(t, err, einostore.ErrNoCheckpoints)
		t.Skipf("%s: sessions keep no checkpoints yet (declared %v): %v", b.Name, st.Declared(), err)
	}
	return st
}

// TestADKApprovalAcrossRestarts is the proof: the same script over eino's
// in-memory map store and over ours on every backend, the store closed and
// reopened and a new Runner built between runs; the model's input on every
// call is byte for byte the reference's, and nothing is left behind.
func TestADKApprovalAcrossRestarts(t *testing.T) {
	defer logServers(t)
	for _, streaming := range []bool{false, true} {
		mode := map[bool]string{false: "generate", true: "stream"}[streaming]
		ref := referenceRun(t, streaming)
		require.Len(t, ref.calls, 2, "the script makes two model calls")
		for _, b := range storetest.Backends() {
			for _, variant := range []string{"app-deletes", "delete-on-get", "encrypted"} {
				t.Run(mode+"/"+b.Name+"/"+variant, func(t *testing.T) {
					u := b.URL(t)
					opts := []einostore.Option{einostore.WithPrefix("eino:")}
					if variant == "delete-on-get" {
						opts = append(opts, einostore.DeleteOnGet())
					}
					// memory:// makes a new store on every Open: the "restart"
					// keeps the store and builds everything else anew.
					var shared adapters.Store
					if !b.Peer {
						shared = openBackend(t, b, u)
						t.Cleanup(func() { _ = shared.Close() })
					}
					open := func() (adapters.Store, func()) {
						if shared != nil {
							return shared, func() {}
						}
						st := openBackend(t, b, u)
						return st, func() { require.NoError(t, st.Close()) }
					}
					newStore := func(st adapters.Store) *einostore.Store {
						if variant == "encrypted" {
							// NewFunc over wrapped sessions: the documents are
							// stored as encrypted envelopes.
							return einostore.NewFunc(func(id string) (session.Session, error) {
								ss, err := st.Session(id)
								if err != nil {
									return nil, err
								}
								return encrypted.New(ss, encrypted.Options{Keys: []encrypted.Key{{Secret: "eino-integration-test-key"}}})
							}, opts...)
						}
						s, err := einostore.New(st, opts...)
						require.NoError(t, err)
						return s
					}
					got := runScript(t, harness{
						open: func() (adk.CheckPointStore, func()) {
							st, closeFn := open()
							return newStore(st), closeFn
						},
						appDelete: variant != "delete-on-get",
						streaming: streaming,
						check: func(t *testing.T, afterRun int) {
							st, closeFn := open()
							defer closeFn()
							ss, err := st.Session("eino:" + checkPointID)
							require.NoError(t, err)
							cs := ss.(session.CheckpointStore)
							names, err := cs.ListCheckpoints(context.Background())
							require.NoError(t, err)
							raw, _, lerr := cs.LoadCheckpoint(context.Background(), einostore.DefaultName)
							if afterRun < 3 {
								require.Equal(t, []string{einostore.DefaultName}, names, "after run %d", afterRun)
								require.NoError(t, lerr)
								require.Equal(t, variant == "encrypted", bytes.HasPrefix(raw, []byte(`{"__enc__"`)), "stored as an envelope iff encrypted")
							} else {
								require.Empty(t, names, "nothing left after the run")
								require.ErrorIs(t, lerr, session.ErrNoCheckpoint)
								items, err := ss.Items(context.Background())
								require.NoError(t, err)
								require.Empty(t, items, "the store wrote no history items")
							}
						},
					})
					require.Equal(t, len(ref.calls), len(got.calls), "model calls")
					for i := range ref.calls {
						eq := bytes.Equal(ref.calls[i], got.calls[i]) && ref.tools[i] == got.tools[i]
						t.Logf("%s %s %s: model call %d: %d messages, %d bytes, tools [%s]: equal to the in-memory run: %v",
							mode, b.Name, variant, i+1, countMessages(t, got.calls[i]), len(got.calls[i]), got.tools[i], eq)
						require.JSONEq(t, string(ref.calls[i]), string(got.calls[i]), "model input, call %d", i+1)
						require.True(t, eq, "model input, call %d, byte for byte", i+1)
					}
				})
			}
		}
	}
}

// logServers says which servers the networked backends ran on.
func logServers(t *testing.T) {
	t.Logf("servers: redis %q, redis-cluster %q, mongo %q, postgres %q",
		testservers.RedisKind(), testservers.RedisClusterKind(), testservers.MongoKind(), testservers.PostgresKind())
}

func countMessages(t *testing.T, b []byte) int {
	var v []json.RawMessage
	require.NoError(t, json.Unmarshal(b, &v))
	return len(v)
}

// TestRestartIsReal is the control: over memory://, where every Open is a
// new empty store, the same reopen loses the checkpoint and eino's resume
// fails, so the script's resumes did depend on what the store kept.
func TestRestartIsReal(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	open := func() *einostore.Store {
		st, err := adapters.Open(ctx, "memory://")
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		s, err := einostore.New(st)
		require.NoError(t, err)
		return s
	}
	id, _ := outcome(t, newRunner(t, rec, open(), false).Query(ctx, userAsk, adk.WithCheckPointID(checkPointID)))
	require.NotEmpty(t, id)
	_, err := newRunner(t, rec, open(), false).ResumeWithParams(ctx, checkPointID, &adk.ResumeParams{Targets: map[string]any{id: "approved"}})
	require.ErrorContains(t, err, "not exist")
	t.Logf("resume over a store that lost the checkpoint: %v", err)
	require.Zero(t, rec.runs)
}
