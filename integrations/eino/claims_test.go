package eino_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	einostore "github.com/agentsessions/sessions/integrations/eino"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
)

// errCrash stands for a process dying inside the tool: the tool returns
// it with its claim saved and no result recorded, which is what a kill
// there leaves in the store.
var errCrash = errors.New("killed inside the tool")

// bank is the tool's system: the transfers it made, by call id.
type bank struct {
	mu    sync.Mutex
	done  map[string]int
	crash func(afterSideEffect bool) bool // die before or after the side effect
	meet  func()                          // a rendezvous before the claim
}

func (b *bank) transfers(callID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done[callID]
}

// claimedTransfer is transferTool with its side effect under a claim: on
// the approved resume it calls Claims.Run, keyed by the checkpoint id of
// its context and its call id.
type claimedTransfer struct {
	claims *einostore.Claims
	bank   *bank
}

func (claimedTransfer) Info(ctx context.Context) (*schema.ToolInfo, error) {
	return transferTool{}.Info(ctx)
}

func (t claimedTransfer) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	wasInterrupted, _, _ := tool.GetInterruptState[any](ctx)
	if !wasInterrupted {
		return "", tool.Interrupt(ctx, "approve transfer "+args+"?")
	}
	isTarget, hasData, decision := tool.GetResumeContext[string](ctx)
	if !isTarget || !hasData || decision != "approved" {
		return "", tool.Interrupt(ctx, "still waiting: approve transfer "+args+"?")
	}
	if t.bank.meet != nil {
		t.bank.meet()
	}
	return t.claims.Run(ctx, func(ctx context.Context) (string, error) {
		if t.bank.crash != nil && t.bank.crash(false) {
			return "", errCrash
		}
		t.bank.mu.Lock()
		t.bank.done[compose.GetToolCallID(ctx)]++
		t.bank.mu.Unlock()
		if t.bank.crash != nil && t.bank.crash(true) {
			return "", errCrash
		}
		return "transferred 100 EUR to bob", nil
	})
}

func newClaimedRunner(t *testing.T, store *einostore.Store, b *bank) *adk.Runner {
	t.Helper()
	ctx := context.Background()
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name:        "teller",
		Description: "moves money with approval",
		Instruction: instruction,
		Model:       &fakeModel{rec: &recorder{}},
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{claimedTransfer{claims: store.Claims(), bank: b}}}},
	})
	require.NoError(t, err)
	return adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: store})
}

// drain returns a run's root-cause interrupt id, final text, and error.
func drain(iter *adk.AsyncIterator[*adk.AgentEvent]) (interruptID, final string, err error) {
	for {
		ev, ok := iter.Next()
		if !ok {
			return interruptID, final, err
		}
		if ev.Err != nil {
			err = ev.Err
			continue
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			for _, c := range ev.Action.Interrupted.InterruptContexts {
				if c.IsRootCause {
					interruptID = c.ID
				}
			}
			continue
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil {
			msg, merr := ev.Output.MessageOutput.GetMessage()
			if merr != nil {
				err = merr
				continue
			}
			if msg.Role == schema.Assistant && len(msg.ToolCalls) == 0 {
				final = msg.Content
			}
		}
	}
}

// claimBackends are the stores the claims are tested on.
func claimBackends(t *testing.T) []storetest.Backend {
	var out []storetest.Backend
	for _, b := range storetest.Backends() {
		switch b.Name {
		case "sqlite", "redis", "postgres":
			out = append(out, b)
		}
	}
	require.Len(t, out, 3)
	return out
}

// TestClaimsAcrossRestart: the tool dies inside its claim (before or after
// its side effect); every later resume, by a new Runner over a reopened
// store, finds the call in doubt and runs nothing until the app resolves
// it from the bank's answer: Resolve when the transfer happened, Reclaim
// when it did not. The transfer happens exactly once either way.
func TestClaimsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	for _, b := range claimBackends(t) {
		for _, afterSideEffect := range []bool{true, false} {
			name := map[bool]string{true: "killed-after-side-effect", false: "killed-before-side-effect"}[afterSideEffect]
			t.Run(b.Name+"/"+name, func(t *testing.T) {
				u := b.URL(t)
				bk := &bank{done: map[string]int{}}
				open := func() (*einostore.Store, func()) {
					st := openBackend(t, b, u)
					s, err := einostore.New(st, einostore.WithPrefix("eino:"))
					require.NoError(t, err)
					return s, func() { require.NoError(t, st.Close()) }
				}
				runCtx := einostore.WithCheckPointID(ctx, checkPointID)

				// Process 1: the tool interrupts for approval.
				store, closeStore := open()
				id, _, err := drain(newClaimedRunner(t, store, bk).Query(runCtx, userAsk, adk.WithCheckPointID(checkPointID)))
				require.NoError(t, err)
				require.NotEmpty(t, id)
				closeStore()

				// Process 2: approved; the tool claims, then dies.
				bk.crash = func(after bool) bool { return after == afterSideEffect }
				store, closeStore = open()
				iter, err := newClaimedRunner(t, store, bk).ResumeWithParams(runCtx, checkPointID, &adk.ResumeParams{Targets: map[string]any{id: "approved"}})
				require.NoError(t, err)
				_, _, err = drain(iter)
				require.ErrorContains(t, err, errCrash.Error())
				closeStore()
				bk.crash = nil
				want := map[bool]int{true: 1, false: 0}[afterSideEffect]
				require.Equal(t, want, bk.transfers("call_1"))

				// Process 3: approved again; the call is in doubt, the tool does not run.
				store, closeStore = open()
				iter, err = newClaimedRunner(t, store, bk).ResumeWithParams(runCtx, checkPointID, &adk.ResumeParams{Targets: map[string]any{id: "approved"}})
				require.NoError(t, err)
				_, final, err := drain(iter)
				require.Error(t, err)
				require.Contains(t, err.Error(), einostore.ErrInDoubt.Error())
				require.Empty(t, final)
				require.Equal(t, want, bk.transfers("call_1"), "a call in doubt does not run")
				claims := store.Claims()
				doubt, err := claims.InDoubt(ctx, checkPointID)
				require.NoError(t, err)
				require.Len(t, doubt, 1)
				require.Equal(t, "call_1", doubt[0].CallID)
				require.False(t, doubt[0].Done)
				// The app asks the bank and resolves.
				if bk.transfers("call_1") > 0 {
					require.NoError(t, claims.Resolve(ctx, checkPointID, "call_1", "transferred 100 EUR to bob"))
				} else {
					require.NoError(t, claims.Reclaim(ctx, checkPointID, "call_1"))
				}
				require.ErrorIs(t, claims.Reclaim(ctx, checkPointID, "call_1"), einostore.ErrNotInDoubt)
				doubt, err = claims.InDoubt(ctx, checkPointID)
				require.NoError(t, err)
				require.Empty(t, doubt)
				closeStore()

				// Process 4: approved; the recorded result, or the reclaimed run.
				store, closeStore = open()
				iter, err = newClaimedRunner(t, store, bk).ResumeWithParams(runCtx, checkPointID, &adk.ResumeParams{Targets: map[string]any{id: "approved"}})
				require.NoError(t, err)
				_, final, err = drain(iter)
				require.NoError(t, err)
				require.Equal(t, "Done: transferred 100 EUR to bob.", final)
				require.Equal(t, 1, bk.transfers("call_1"), "the transfer happened exactly once")
				// A resume of the consumed checkpoint gets the recorded result again.
				iter, err = newClaimedRunner(t, store, bk).ResumeWithParams(runCtx, checkPointID, &adk.ResumeParams{Targets: map[string]any{id: "approved"}})
				require.NoError(t, err)
				_, final, err = drain(iter)
				require.NoError(t, err)
				require.Equal(t, "Done: transferred 100 EUR to bob.", final)
				require.Equal(t, 1, bk.transfers("call_1"))
				// Done: the checkpoint and its claims go.
				list, err := store.Claims().List(ctx, checkPointID)
				require.NoError(t, err)
				require.Len(t, list, 1)
				require.True(t, list[0].Done)
				require.NoError(t, store.Delete(ctx, checkPointID))
				require.NoError(t, store.Claims().Clear(ctx, checkPointID))
				cs, err := store.Session(checkPointID)
				require.NoError(t, err)
				names, err := cs.ListCheckpoints(ctx)
				require.NoError(t, err)
				require.Empty(t, names)
				closeStore()
				t.Logf("%s %s: transfers=%d in-doubt reports=1 resolved by %s", b.Name, name, bk.transfers("call_1"),
					map[bool]string{true: "Resolve", false: "Reclaim"}[afterSideEffect])
			})
		}
	}
}

// TestClaimsTwoResumers: two Runners, each over its own store handle (as
// two processes), resume one interrupted checkpoint at once with the
// approval; both tools reach the claim together. 15 tries per backend: the
// transfer happens exactly once in every try.
func TestClaimsTwoResumers(t *testing.T) {
	const tries = 15
	ctx := context.Background()
	for _, b := range claimBackends(t) {
		t.Run(b.Name, func(t *testing.T) {
			u := b.URL(t)
			stA, stB := openBackend(t, b, u), openBackend(t, b, u)
			t.Cleanup(func() { _ = stA.Close(); _ = stB.Close() })
			newStore := func(st adapters.Store) *einostore.Store {
				s, err := einostore.New(st, einostore.WithPrefix("eino:"))
				require.NoError(t, err)
				return s
			}
			sa, sb := newStore(stA), newStore(stB)
			outcomes := map[string]int{}
			transfers := 0
			for try := range tries {
				cp := fmt.Sprintf("race-%d", try)
				runCtx := einostore.WithCheckPointID(ctx, cp)
				bk := &bank{done: map[string]int{}}
				id, _, err := drain(newClaimedRunner(t, sa, bk).Query(runCtx, userAsk, adk.WithCheckPointID(cp)))
				require.NoError(t, err)
				require.NotEmpty(t, id)

				// Both tools wait for each other before claiming.
				var arrived atomic.Int32
				both := make(chan struct{})
				bk.meet = func() {
					if arrived.Add(1) == 2 {
						close(both)
					}
					select {
					case <-both:
					case <-time.After(5 * time.Second): // the other never got here
					}
				}
				var wg sync.WaitGroup
				results := make([]string, 2)
				for i, s := range []*einostore.Store{sa, sb} {
					r := newClaimedRunner(t, s, bk)
					wg.Go(func() {
						iter, err := r.ResumeWithParams(runCtx, cp, &adk.ResumeParams{Targets: map[string]any{id: "approved"}})
						if err != nil {
							results[i] = "resume error: " + err.Error()
							return
						}
						_, final, err := drain(iter)
						switch {
						case err != nil && strings.Contains(err.Error(), einostore.ErrInDoubt.Error()):
							results[i] = "in-doubt"
						case err != nil:
							results[i] = "error: " + err.Error()
						default:
							results[i] = final
						}
					})
				}
				wg.Wait()
				for _, r := range results {
					require.True(t, r == "in-doubt" || r == "Done: transferred 100 EUR to bob.", "try %d: %q", try, r)
					outcomes[r]++
				}
				require.Contains(t, results, "Done: transferred 100 EUR to bob.", "try %d", try)
				require.Equal(t, 1, bk.transfers("call_1"), "try %d: the transfer happened exactly once (%q)", try, results)
				transfers += bk.transfers("call_1")
				doubt, err := sa.Claims().InDoubt(ctx, cp)
				require.NoError(t, err)
				require.Empty(t, doubt, "try %d: the winner recorded its result", try)
				require.NoError(t, sa.Delete(ctx, cp))
				require.NoError(t, sa.Claims().Clear(ctx, cp))
			}
			t.Logf("two resumers on %s: tries=%d transfers=%d outcomes %v", b.Name, tries, transfers, outcomes)
		})
	}
}

// TestClaimsNeedIDs: a tool run without the checkpoint id in its context
// is refused before its side effect.
func TestClaimsNeedIDs(t *testing.T) {
	st, err := adapters.Open(context.Background(), "memory://")
	require.NoError(t, err)
	defer st.Close()
	s, err := einostore.New(st)
	require.NoError(t, err)
	ran := false
	_, err = s.Claims().Run(context.Background(), func(context.Context) (string, error) { ran = true; return "", nil })
	require.ErrorIs(t, err, einostore.ErrNoCallID)
	require.False(t, ran)
}
