package openaigo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The compacted conversation: turn k is the user's message "k<k>"; the
// model answers turn 3m+1 with reasoning and a message, turn 3m+2 with
// reasoning and a lookup call the loop runs at once (then a message), and
// turn 3m with reasoning and a delete_file call that needs a human's
// approval under output guardrails: the turn is withheld on the
// checkpoint, the process exits, another one approves, runs the tool
// under a claim, settles and asks the model again. Every 20th turn a
// second process appends a note of its own while the model call is out,
// and every 7th compaction it appends one while the compact request is
// out. The session is a compaction session (the default trigger: 10
// candidates), so it is compacted as it goes.

func compactedUser(k int) string { return fmt.Sprintf(`{"role":"user","content":"k%d"}`, k) }

func noteItems(k int) []session.Item {
	return []session.Item{
		session.MustItem(fmt.Sprintf(`{"role":"user","content":"note %d"}`, k)),
		session.MustItem(assistant(fmt.Sprintf("msg_note_%d", k), fmt.Sprintf("noted %d", k))),
	}
}

// compactedAPI answers from the last input item.
func compactedAPI(_ int, input []session.Item) [][]byte {
	var out []string
	last := input[len(input)-1]
	c, _ := last.StringField("content")
	switch {
	case last.Role() == "user" && strings.HasPrefix(c, "k"):
		k, _ := strconv.Atoi(c[1:])
		switch k % 3 {
		case 1:
			out = []string{reasoningItem(fmt.Sprintf("rs_%d", k), "Answer."), assistant(fmt.Sprintf("msg_%d", k), fmt.Sprintf("answer %d", k))}
		case 2:
			out = []string{reasoningItem(fmt.Sprintf("rs_%d", k), "Look it up."), functionCall(fmt.Sprintf("fc_%d", k), fmt.Sprintf("t%d", k), "lookup", fmt.Sprintf(`{"k":%d}`, k))}
		default:
			out = []string{reasoningItem(fmt.Sprintf("rs_%d", k), "Deleting needs approval."), functionCall(fmt.Sprintf("fc_%d", k), fmt.Sprintf("c%d", k), "delete_file", fmt.Sprintf(`{"path":"/tmp/f%d"}`, k))}
		}
	case last.Type() == "function_call_output":
		k := strings.TrimLeft(last.CallID(), "tc")
		out = []string{reasoningItem("rs_"+k+"b", "Done."), assistant("msg_"+k+"b", "done "+k)}
	default:
		out = []string{assistant("msg_unexpected", "unexpected input")}
	}
	b := make([][]byte, len(out))
	for i, s := range out {
		b[i] = []byte(s)
	}
	return b
}

type compactedLog struct {
	turns, restarts, compactions, deferred, kept, requests int
	notes                                                  []string // the second writer's user messages
}

// runCompacted drives n turns on the store reopen opens, each process a
// new store, session and Run.
func runCompacted(t *testing.T, reopen func() func(string) session.Session, n int) (compactedLog, []session.Item, *fakeAPI) {
	ctx := context.Background()
	api := newFakeAPI(t, compactedAPI)
	client := newClient(api.URL())
	var mu sync.Mutex
	var lg compactedLog
	observe := func(r openaigo.CompactionReport) {
		mu.Lock()
		defer mu.Unlock()
		lg.compactions++
		lg.kept += r.Kept
		if r.Deferred {
			lg.deferred++
		}
		lg.requests += r.Requests
	}
	process := func() (session.Session, *runstate.Run) {
		s, err := openaigo.NewCompactionSession(reopen()("conv"), &client, openaigo.CompactionOptions{Observe: observe})
		require.NoError(t, err)
		run, err := runstate.Open(ctx, s, approvalOpts)
		require.NoError(t, err)
		return s, run
	}
	other := reopen()("conv") // the second writer, a process of its own
	note := func(k int) {
		require.NoError(t, session.Append(ctx, other, noteItems(k)))
		mu.Lock()
		lg.notes = append(lg.notes, fmt.Sprintf("note %d", k))
		mu.Unlock()
	}
	model := func(s session.Session) *responses.Response {
		params, err := openaigo.New(s, openaigo.Options{}).Params(ctx, e2eBase)
		require.NoError(t, err)
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			t.Fatalf("model call: %s", apiMessage(err))
		}
		return resp
	}
	override := func(raw string) responses.ResponseInputItemUnionParam {
		return param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(raw))
	}
	s, run := process()
	for k := 1; k <= n; k++ {
		require.NoError(t, openaigo.RunInput(ctx, run, override(compactedUser(k))))
		resp := model(s)
		if k%20 == 0 {
			note(k) // lands between the model call and the save of its answer
		}
		if k%9 == 4 {
			api.duringCompact(func() { note(1000 + k) })
		}
		switch k % 3 {
		case 1:
			require.NoError(t, openaigo.Finish(ctx, run, resp))
		case 2:
			out := session.MustItem(fmt.Sprintf(`{"type":"function_call_output","call_id":"t%d","output":"found %d"}`, k, k))
			require.NoError(t, openaigo.Turn(ctx, run, resp, out))
			require.NoError(t, openaigo.Finish(ctx, run, model(s)))
		default:
			items, err := openaigo.OutputItems(resp)
			require.NoError(t, err)
			require.NoError(t, openaigo.Interrupt(ctx, run, resp, openaigo.NeedsApproval(items, needsApproval)))
			s, run = process() // the process exits; another approves
			lg.restarts++
			calls, err := openaigo.AwaitingCalls(ctx, run, s)
			require.NoError(t, err)
			require.Len(t, calls, 1)
			require.NoError(t, openaigo.RunTool(ctx, run, calls[0], func(context.Context, session.Item) (responses.ResponseInputItemUnionParam, error) {
				return override(approvalToolOutput(calls[0].CallID())), nil
			}))
			require.NoError(t, run.Settle(ctx))
			require.NoError(t, openaigo.Finish(ctx, run, model(s)))
		}
		lg.turns++
	}
	got, err := session.All(ctx, reopen()("conv"))
	require.NoError(t, err)
	return lg, got, api
}

// TestCompactedConversation: 300 turns (60 under -short) on SQLite, Redis
// and PostgreSQL, compacted as they go, with approvals, restarts and a
// second writer: the fake API validates every request (pairing, reasoning
// followers, duplicate ids, its own compaction items) and rejects none,
// every user message of both writers is in the final history once and in
// order (a compaction keeps the user messages), and nothing is broken.
func TestCompactedConversation(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 60
	}
	for _, b := range everyBackend() {
		if !slices.Contains([]string{"sqlite", "redis", "postgres"}, b.name) {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			_, reopen := b.open(t)
			lg, got, api := runCompacted(t, reopen, n)
			calls, _, rejected := api.stats()
			require.Empty(t, rejected, "requests the API would reject")

			var users []string
			for _, it := range got {
				if it.Role() == "user" {
					c, _ := it.StringField("content")
					users = append(users, c)
				}
			}
			want := wantUsers(n, lg.notes)
			lost := 0
			for _, w := range want {
				if !slices.Contains(users, w) {
					lost++
				}
			}
			require.Equal(t, 0, lost, "user messages lost")
			require.ElementsMatch(t, want, users, "each user message once")
			require.Equal(t, order(users, "k"), sortedCopy(order(users, "k")), "the turns' messages in order")
			require.Empty(t, history.Diagnose(got))
			require.Positive(t, lg.compactions)
			require.Positive(t, lg.kept, "appends beside a compaction were kept")
			t.Logf("%s: turns=%d restarts=%d second-writer-notes=%d compactions=%d (deferred=%d, kept beside=%d items, compact requests=%d) model requests validated=%d rejected=%d items lost=%d final history=%d items",
				b.name, lg.turns, lg.restarts, len(lg.notes), lg.compactions, lg.deferred, lg.kept, lg.requests, calls, len(rejected), lost, len(got))
		})
	}
}

func wantUsers(n int, notes []string) []string {
	want := slices.Clone(notes)
	for k := 1; k <= n; k++ {
		want = append(want, fmt.Sprintf("k%d", k))
	}
	return want
}

// order returns the numbers of the messages with prefix, in history order.
func order(users []string, prefix string) []int {
	var out []int
	for _, u := range users {
		if n, err := strconv.Atoi(strings.TrimPrefix(u, prefix)); err == nil && strings.HasPrefix(u, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func sortedCopy(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
