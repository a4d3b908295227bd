package openaigo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The Conversations end-to-end script: turn k is the user's message t<k>;
// the model answers with reasoning and a weather call w<k> (no approval),
// and on every third turn also a delete_file call d<k> that needs a human
// (output guardrails, stop-on-first-tool: the turn is withheld on the
// checkpoint until approved); once the outputs are in, reasoning and
// "done k" end the run.

func convUser(k int) string { return fmt.Sprintf(`{"role":"user","content":"t%d"}`, k) }

func convFirst(k int) []string {
	out := []string{
		reasoningItem(fmt.Sprintf("rs_%da", k), "Weather first."),
		functionCall(fmt.Sprintf("fc_w%d", k), fmt.Sprintf("w%d", k), "weather", fmt.Sprintf(`{"city":"c%d"}`, k)),
	}
	if k%3 == 0 {
		out = append(out, functionCall(fmt.Sprintf("fc_d%d", k), fmt.Sprintf("d%d", k), "delete_file", fmt.Sprintf(`{"path":"/tmp/f%d"}`, k)))
	}
	return out
}

func convFinal(k int) []string {
	return []string{reasoningItem(fmt.Sprintf("rs_%db", k), "Answer."), assistant(fmt.Sprintf("msg_%d", k), fmt.Sprintf("done %d", k))}
}

func convOutput(callID string) string {
	return fmt.Sprintf(`{"type":"function_call_output","call_id":%q,"output":"ran %s"}`, callID, callID)
}

// convExpected is turn k's history as the API and the agent wrote it.
func convExpected(k int) []string {
	f := convFirst(k)
	out := append([]string{convUser(k)}, f...)
	out = append(out, convOutput(fmt.Sprintf("w%d", k)))
	if k%3 == 0 {
		out = append(out, convOutput(fmt.Sprintf("d%d", k)))
	}
	return append(out, convFinal(k)...)
}

// convAPI answers from the last input item alone.
func convAPI(_ int, input []session.Item) [][]byte {
	var out []string
	if n := len(input); n > 0 {
		last := input[n-1]
		if c, ok := last.StringField("content"); ok && last.Role() == "user" && strings.HasPrefix(c, "t") {
			if k, err := strconv.Atoi(c[1:]); err == nil {
				out = convFirst(k)
			}
		} else if last.Type() == "function_call_output" {
			if k, err := strconv.Atoi(last.CallID()[1:]); err == nil {
				out = convFinal(k)
			}
		}
	}
	if out == nil {
		out = []string{assistant("msg_unexpected", "unexpected input")}
	}
	b := make([][]byte, len(out))
	for i, s := range out {
		b[i] = []byte(s)
	}
	return b
}

var doneText = regexp.MustCompile(`"text":"done (\d+)"`)

// convProc is one process of one writer: its own client, session value
// and Run on the conversation.
type convProc struct {
	writer int
	s      *openaigo.ConversationsSession
	run    *runstate.Run
	client *openai.Client
}

// convDriver drives the script on one conversation through processes
// that come and go.
type convDriver struct {
	t      *testing.T
	fc     *fakeConv
	conv   string
	store  *memory.Store // the checkpoints: the caller's store (runstate.Options.Store)
	turns  int
	window int

	mu      sync.Mutex
	acted   map[string]int // tool side effects, by call id
	opens   int
	crashes int
	lenient int
}

func (d *convDriver) open(ctx context.Context, writer int) (*convProc, error) {
	d.opens++
	client := d.fc.client(option.WithHeader("X-Writer", strconv.Itoa(writer)))
	s := openaigo.NewConversationsSession(client, openaigo.ConversationsOptions{ConversationID: d.conv})
	cps, err := d.store.Session(d.conv)
	if err != nil {
		return nil, err
	}
	run, err := runstate.Open(ctx, s, runstate.Options{
		OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool,
		Store: cps, Owner: fmt.Sprintf("writer-%d", writer),
	})
	if err != nil {
		return nil, fmt.Errorf("open (writer %d): %w", writer, err)
	}
	return &convProc{writer: writer, s: s, run: run, client: client}, nil
}

func (d *convDriver) tool(_ context.Context, call session.Item) (responses.ResponseInputItemUnionParam, error) {
	d.mu.Lock()
	d.acted[call.CallID()]++
	d.mu.Unlock()
	return param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(convOutput(call.CallID()))), nil
}

// step does what p's run needs next; it reports the turn a Finish ended
// or an Interrupt parked, and whether the script is over.
func (d *convDriver) step(ctx context.Context, p *convProc) (finished, parked int, over bool, err error) {
	next := p.run.Next()
	switch next.Kind {
	case runstate.NextInput, runstate.NextDone:
		tail, err := session.Latest(ctx, p.s, 1)
		if err != nil {
			return 0, 0, false, err
		}
		k := 0
		if len(tail) == 1 {
			m := doneText.FindSubmatch(tail[0].Bytes())
			if m == nil {
				return 0, 0, false, fmt.Errorf("the run is %s and the last item is not a final answer: %s", next.Kind, tail[0])
			}
			k, _ = strconv.Atoi(string(m[1]))
		}
		if k >= d.turns {
			return 0, 0, true, nil
		}
		return 0, 0, false, openaigo.RunInput(ctx, p.run, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(convUser(k+1))))
	case runstate.NextModel:
		params, err := openaigo.New(p.s, openaigo.Options{Window: d.window}).Params(ctx, e2eBase)
		if err != nil {
			return 0, 0, false, err
		}
		resp, err := p.client.Responses.New(ctx, params)
		if isRejection(err) {
			d.lenient++
			resp, err = p.client.Responses.New(ctx, params, option.WithHeader("X-Fake-Lenient", "1"))
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("model call: %w", err)
		}
		items, err := openaigo.OutputItems(resp)
		if err != nil {
			return 0, 0, false, err
		}
		var outputs []session.Item
		calls := false
		for _, it := range items {
			if it.Type() == "function_call" {
				calls = true
				if !needsApproval(it) {
					out, _ := d.tool(ctx, it)
					o, err := openaigo.ItemOf(out)
					if err != nil {
						return 0, 0, false, err
					}
					outputs = append(outputs, o)
				}
			}
		}
		switch ids := openaigo.NeedsApproval(items, needsApproval); {
		case len(ids) > 0:
			k, _ := strconv.Atoi(strings.TrimPrefix(ids[0], "d"))
			return 0, k, false, openaigo.Interrupt(ctx, p.run, resp, ids, outputs...)
		case calls:
			return 0, 0, false, openaigo.Turn(ctx, p.run, resp, outputs...)
		default:
			m := doneText.FindStringSubmatch(items[len(items)-1].String())
			if m == nil {
				return 0, 0, false, fmt.Errorf("an unexpected final answer: %s", items[len(items)-1])
			}
			k, _ := strconv.Atoi(m[1])
			return k, 0, false, openaigo.Finish(ctx, p.run, resp)
		}
	case runstate.NextApproval:
		calls, err := openaigo.AwaitingCalls(ctx, p.run, p.s)
		if err != nil {
			return 0, 0, false, err
		}
		for _, c := range calls { // approved
			if err := openaigo.RunTool(ctx, p.run, c, d.tool); err != nil {
				return 0, 0, false, err
			}
		}
		return 0, 0, false, nil
	case runstate.NextResolve:
		calls, err := openaigo.InDoubtCalls(ctx, p.run, p.s)
		if err != nil {
			return 0, 0, false, err
		}
		for _, c := range calls {
			d.mu.Lock()
			acted := d.acted[c.CallID()] > 0
			d.mu.Unlock()
			if acted { // the tool's system says it acted: record what it did
				err = openaigo.Output(ctx, p.run, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(convOutput(c.CallID()))))
			} else if err = p.run.Reclaim(ctx, c.CallID()); err == nil {
				err = openaigo.RunTool(ctx, p.run, c, d.tool)
			}
			if err != nil {
				return 0, 0, false, err
			}
		}
		return 0, 0, false, nil
	case runstate.NextSettle:
		return 0, 0, false, p.run.Settle(ctx)
	}
	return 0, 0, false, fmt.Errorf("unexpected next step %s", next.Kind)
}

// TestConversationsEndToEnd runs a long conversation on a
// ConversationsSession through runstate.Run: tool calls, approvals under
// output guardrails resumed by another process, restarts, a second writer
// taking turns, and lost replies and 429s on the conversation's writes;
// every request to /v1/responses is checked by the fake (pairing,
// reasoning items and their followers, duplicate ids). Nothing may be
// lost, duplicated or rejected.
func TestConversationsEndToEnd(t *testing.T) {
	turns := 300
	if testing.Short() {
		turns = 60
	}
	ctx := context.Background()
	api := newFakeAPI(t, convAPI)
	fc := newFakeConv(t, api)
	first := openaigo.NewConversationsSession(fc.client(), openaigo.ConversationsOptions{})
	conv, err := first.ConversationID(ctx)
	require.NoError(t, err)
	d := &convDriver{t: t, fc: fc, conv: conv, store: memory.New(memory.Options{}), turns: turns, window: 60, acted: map[string]int{}}

	start := time.Now()
	p, err := d.open(ctx, 0)
	require.NoError(t, err)
	switches, restarts, faults, races := 0, 0, 0, 0
	for steps := 0; ; steps++ {
		require.Less(t, steps, turns*20, "the script does not end")
		finished, parked, over, err := d.step(ctx, p)
		if over {
			break
		}
		if err != nil {
			// The process dies; another (of the same writer) opens the
			// run, which recovers what the lost reply left.
			require.ErrorIs(t, err, session.ErrOutcomeUnknown, "only the injected lost replies may fail a step")
			d.crashes++
			for {
				if p, err = d.open(ctx, p.writer); err == nil {
					break
				}
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				d.crashes++
			}
			continue
		}
		switch {
		case parked > 0 && parked%4 == 0:
			// Both writers' processes take up the approval at once: one
			// claims the call and runs its tool, the other's claim
			// conflicts before its tool runs.
			ps := [2]*convProc{}
			for w := range ps {
				ps[w], err = d.open(ctx, w)
				require.NoError(t, err)
			}
			var errs [2]error
			var wg sync.WaitGroup
			for w := range ps {
				wg.Go(func() { _, _, _, errs[w] = d.step(ctx, ps[w]) })
			}
			wg.Wait()
			winners := 0
			for w, err := range errs {
				if err == nil {
					winners++
					p = ps[w]
					continue
				}
				require.True(t, errors.Is(err, session.ErrCheckpointConflict) || errors.Is(err, runstate.ErrInDoubt), "the loser's error: %v", err)
			}
			require.Equal(t, 1, winners, "one of two concurrent approvers wins: %v", errs)
			races++
		case parked > 0 && parked%2 == 0:
			// The approval comes back to the other writer's process.
			p, err = d.open(ctx, 1-p.writer)
			require.NoError(t, err)
			switches++
		case finished > 0 && finished%10 == 0:
			p, err = d.open(ctx, 1-p.writer) // the second writer takes the next turns
			require.NoError(t, err)
			switches++
		case finished > 0 && finished%25 == 0, parked%5 == 1:
			p, err = d.open(ctx, p.writer) // a restart
			require.NoError(t, err)
			restarts++
		}
		if finished > 0 {
			// Faults on the conversation's writes in the turns to come:
			// 429s (openai-go retries them), a 503 before the write and
			// a reply lost after it (both session.ErrOutcomeUnknown).
			switch finished % 7 {
			case 1:
				fc.failNext("POST items", injected{code: 429})
				faults++
			case 3:
				fc.failNext("POST items", injected{code: 503})
				faults++
			case 5:
				fc.failNext("POST items", injected{code: dropConn, applied: true})
				faults++
			}
		}
	}
	elapsed := time.Since(start)

	// The history: every turn's items once, in order, JSON-equal without
	// the ids the API gave (items that rode a checkpoint come back with
	// sorted keys).
	all, err := first.Items(ctx)
	require.NoError(t, err)
	var want []string
	for k := 1; k <= turns; k++ {
		for _, s := range convExpected(k) {
			fp, err := history.Fingerprint(session.MustItem(s), true)
			require.NoError(t, err)
			want = append(want, fp)
		}
	}
	got := make([]string, len(all))
	for i, it := range all {
		got[i], err = history.Fingerprint(it, true)
		require.NoError(t, err)
	}
	lost, extra := multisetDiff(want, got)
	calls, empty, rejected := api.stats()
	dupRejected, injectedFailures := fc.stats()
	aliased := fc.aliasedInputs()
	multiple := 0
	for _, n := range d.acted {
		if n > 1 {
			multiple++
		}
	}
	t.Logf("conversations e2e: %d turns in %s; %d items stored (%d expected); items lost: %d, items duplicated: %d; "+
		"model calls answered %d, requests rejected: %d (input rules %d, duplicate ids %d), empty inputs %d, "+
		"input items sent under a conversation id and checked as the response item they were stored from: %d; "+
		"processes opened %d (writer switches %d, restarts %d, after a failed write %d, concurrent approvers %d pairs, one winner each); faults queued %d, injected failures answered %d; tools run more than once: %d",
		turns, elapsed.Round(time.Millisecond), len(all), len(want), lost, extra,
		calls, len(rejected)+len(dupRejected), len(rejected), len(dupRejected), empty,
		aliased, d.opens, switches, restarts, d.crashes, races, faults, injectedFailures, multiple)
	require.Zero(t, lost, "items lost")
	require.Zero(t, extra, "items duplicated")
	require.Empty(t, rejected, "requests the fake API rejected")
	require.Empty(t, dupRejected, "requests with duplicate ids")
	require.Equal(t, want, got, "the history, in order")
	require.Zero(t, d.lenient)
	require.Zero(t, empty)
	require.Positive(t, aliased, "the fake's reasoning rules saw conversation items")
	require.Positive(t, d.crashes, "lost replies were injected and recovered from")
	require.Positive(t, races, "two writers raced for an approval")
	require.Equal(t, 2*turns, calls, "two model calls a turn, none repeated")
	require.Zero(t, multiple, "a tool ran twice")
}

// multisetDiff counts the strings of want missing from got and of got
// beyond want.
func multisetDiff(want, got []string) (lost, extra int) {
	n := map[string]int{}
	for _, s := range want {
		n[s]++
	}
	for _, s := range got {
		n[s]--
	}
	for _, c := range n {
		if c > 0 {
			lost += c
		} else {
			extra -= c
		}
	}
	return lost, extra
}
