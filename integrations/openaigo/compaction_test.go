package openaigo_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// turnItems is one turn of a conversation: the user's message, a call, its
// output, the model's answer (three compaction candidates).
func turnItems(n int) []session.Item {
	return []session.Item{
		session.MustItem(fmt.Sprintf(`{"role":"user","content":"question %d"}`, n)),
		session.MustItem(functionCall(fmt.Sprintf("fc_t%d", n), fmt.Sprintf("call_t%d", n), "lookup", `{}`)),
		session.MustItem(fmt.Sprintf(`{"type":"function_call_output","call_id":"call_t%d","output":"found %d"}`, n, n)),
		session.MustItem(assistant(fmt.Sprintf("msg_t%d", n), fmt.Sprintf("answer %d", n))),
	}
}

func addTurns(t *testing.T, s session.Session, from, to int) {
	t.Helper()
	for n := from; n <= to; n++ {
		require.NoError(t, session.Append(context.Background(), s, turnItems(n)))
	}
}

func newCompacting(t *testing.T, s session.Session, api *fakeAPI, opts openaigo.CompactionOptions) session.Session {
	t.Helper()
	c, err := openaigo.NewCompactionSession(s, ptr(newClient(api.URL())), opts)
	require.NoError(t, err)
	return c
}

func compactNow(ctx context.Context, s session.Session, args session.CompactionArgs) error {
	return s.(session.CompactionAware).RunCompaction(ctx, args)
}

// users returns the user messages' texts and the number of compaction items.
func shape(items []session.Item) (users []string, compactions int) {
	for _, it := range items {
		switch {
		case it.Type() == "compaction":
			compactions++
		case it.Role() == "user":
			c, _ := it.Field("content")
			users = append(users, string(c))
		}
	}
	return users, compactions
}

func TestCompactionTrigger(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, e2eScript)
	var reports []openaigo.CompactionReport
	s := newCompacting(t, memSession(t, "conv"), api, openaigo.CompactionOptions{
		Mode:    session.CompactionInput,
		Observe: func(r openaigo.CompactionReport) { reports = append(reports, r) },
	})
	addTurns(t, s, 1, 3) // 9 candidates
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_x"}))
	assert.Empty(t, api.compactions(), "9 candidates: no compaction")

	require.NoError(t, session.Append(ctx, s, turnItems(4)[:2])) // a call waits for its output
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_x"}))
	assert.Empty(t, api.compactions(), "a call waits for its output")
	require.Len(t, reports, 1)
	assert.True(t, reports[0].Deferred, "%+v", reports[0])
	_, deferred := s.(session.CompactionDeferrer).DeferredCompaction()
	assert.True(t, deferred)

	require.NoError(t, session.Append(ctx, s, turnItems(4)[2:]))
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_x"}))
	require.Len(t, api.compactions(), 1)
	assert.Equal(t, compactRequest{Model: openaigo.DefaultCompactionModel, Input: 16}, api.compactions()[0])
	got, err := session.All(ctx, s)
	require.NoError(t, err)
	users, n := shape(got)
	assert.Equal(t, []string{`"question 1"`, `"question 2"`, `"question 3"`, `"question 4"`}, users)
	assert.Equal(t, 1, n)
	assert.Len(t, got, 5)
	assert.Equal(t, int64(16), reports[1].Usage.InputTokens, "the fake's usage: one input token an item")
	reports[1].Usage = responses.ResponseUsage{}
	assert.Equal(t, openaigo.CompactionReport{Mode: session.CompactionInput, ResponseID: "resp_x", Before: 16, After: 5, Requests: 1}, reports[1])

	// The compacted history is a valid input: the fake verifies the
	// compaction item it produced.
	h := openaigo.New(s, openaigo.Options{})
	params, err := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
	require.NoError(t, err)
	client := newClient(api.URL())
	_, err = client.Responses.New(ctx, params)
	require.NoError(t, err)

	// A forced compaction compacts whatever the trigger says.
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_001", Force: true}))
	assert.Len(t, api.compactions(), 2)
}

// Auto mode compacts a stored response by previous_response_id and an
// unstored one (store false, here or seen before) from its input.
func TestCompactionModes(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, answerScript)
	client := newClient(api.URL())
	s := newCompacting(t, memSession(t, "conv"), api, openaigo.CompactionOptions{ShouldCompact: func(openaigo.CompactionContext) bool { return true }})
	addTurns(t, s, 1, 1)
	h := openaigo.New(s, openaigo.Options{})
	params, err := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
	require.NoError(t, err)
	resp, err := client.Responses.New(ctx, params) // stored: the API's default
	require.NoError(t, err)
	require.NoError(t, h.AddResponse(ctx, resp))

	yes, no := true, false
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: resp.ID}))
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_unstored", Store: &no}))
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_unstored"})) // remembered unstored
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: resp.ID, Store: &yes}))
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: resp.ID, Mode: session.CompactionInput}))
	var got []string
	for _, c := range api.compactions() {
		got = append(got, fmt.Sprintf("previous=%s input=%v", c.Previous, c.Input > 0))
	}
	assert.Equal(t, []string{
		"previous=resp_001 input=false",
		"previous= input=true",
		"previous= input=true",
		"previous=resp_001 input=false",
		"previous= input=true",
	}, got)

	none := newCompacting(t, memSession(t, "other"), api, openaigo.CompactionOptions{Mode: session.CompactionPreviousResponseID})
	assert.ErrorContains(t, compactNow(ctx, none, session.CompactionArgs{Force: true}), "needs a response id")
}

// answerScript answers every request with one assistant message.
func answerScript(call int, _ []session.Item) [][]byte {
	return [][]byte{[]byte(assistant(fmt.Sprintf("msg_a%d", call), "ok"))}
}

// serverHistory stands in for a session whose history the API keeps.
type serverHistory struct{ session.Session }

func (serverHistory) IgnoreIDsForMatching() bool { return true }

func TestCompactionRefuses(t *testing.T) {
	api := newFakeAPI(t, e2eScript)
	_, err := openaigo.NewCompactionSession(serverHistory{memSession(t, "conv")}, ptr(newClient(api.URL())), openaigo.CompactionOptions{})
	assert.ErrorIs(t, err, openaigo.ErrServerHistory)
	for model, ok := range map[string]bool{
		"gpt-4.1": true, "o3": true, "o4-mini": true, "ft:gpt-4o-mini:org:proj:x": true, " gpt-5 ": true,
		"claude-3": false, "omni": false, "o": false, "ft:claude": false, "gpt4": false,
	} {
		_, err := openaigo.NewCompactionSession(memSession(t, "conv"), ptr(newClient(api.URL())), openaigo.CompactionOptions{Model: model})
		if ok {
			assert.NoError(t, err, model)
		} else {
			assert.ErrorIs(t, err, openaigo.ErrCompactionModel, model)
		}
	}
	_, err = openaigo.NewCompactionSession(memSession(t, "conv"), ptr(newClient(api.URL())), openaigo.CompactionOptions{Mode: "summary"})
	assert.ErrorContains(t, err, `unknown compaction mode "summary"`)
}

// pythonCompaction is the Python SDK's replacement, step by step: read
// the history, compact it, clear the session, add the output.
func pythonCompaction(ctx context.Context, t *testing.T, s session.Session, api *fakeAPI) {
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	client := newClient(api.URL())
	resp, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model: "gpt-4.1",
		Input: responses.ResponseCompactParamsInputUnion{OfResponseInputItemArray: openaigo.InputParams(items)},
	})
	require.NoError(t, err)
	require.NoError(t, session.Clear(ctx, s))
	var out []session.Item
	for _, o := range resp.Output {
		out = append(out, session.MustItem(o.RawJSON()))
	}
	require.NoError(t, session.Append(ctx, s, out))
}

// A turn appended by another process while the compact request is out
// (seconds, against the real API) is lost by Python's clear-then-add and
// kept by ours, on every backend; a write that answers a call the
// compaction took makes it compact again, and nothing is lost either way.
func TestCompactionKeepsAppendsBeside(t *testing.T) {
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open, reopen := b.open(t)
			api := newFakeAPI(t, e2eScript)

			// Python's way loses the other process's turn.
			py, other := open("python"), reopen()("python")
			addTurns(t, py, 1, 3)
			api.duringCompact(func() { addTurns(t, other, 4, 4) })
			pythonCompaction(ctx, t, py, api)
			got, err := session.All(ctx, py)
			require.NoError(t, err)
			users, _ := shape(got)
			assert.Equal(t, []string{`"question 1"`, `"question 2"`, `"question 3"`}, users, "Python's clear-then-add lost question 4")

			// Ours keeps it, after the compacted output, in one request.
			var reports []openaigo.CompactionReport
			s := newCompacting(t, open("ours"), api, openaigo.CompactionOptions{Mode: session.CompactionInput, Observe: func(r openaigo.CompactionReport) { reports = append(reports, r) }})
			other = reopen()("ours")
			addTurns(t, s, 1, 3)
			api.duringCompact(func() { addTurns(t, other, 4, 4) })
			require.NoError(t, compactNow(ctx, s, session.CompactionArgs{Force: true}))
			got, err = session.All(ctx, s)
			require.NoError(t, err)
			users, n := shape(got)
			assert.Equal(t, []string{`"question 1"`, `"question 2"`, `"question 3"`, `"question 4"`}, users)
			assert.Equal(t, 1, n)
			assert.Len(t, got, 3+1+4)
			assert.Equal(t, got[4:], turnItems(4))
			require.Len(t, reports, 1)
			assert.Equal(t, 4, reports[0].Kept)
			assert.Equal(t, 1, reports[0].Requests)

			// An output appended beside it whose call the compaction took
			// cannot follow the output: the compaction is sent again.
			s2 := newCompacting(t, open("answers"), api, openaigo.CompactionOptions{Mode: session.CompactionInput})
			other = reopen()("answers")
			addTurns(t, s2, 1, 3)
			require.NoError(t, session.Append(ctx, s2, turnItems(4)[:2]))
			require.NoError(t, session.Append(ctx, s2, turnItems(4)[2:3])) // the call answered
			api.duringCompact(func() {
				require.NoError(t, session.Append(ctx, other, turnItems(4)[3:])) // the model's answer, no user message first
			})
			before := len(api.compactions())
			require.NoError(t, compactNow(ctx, s2, session.CompactionArgs{Force: true}))
			assert.Equal(t, 2, len(api.compactions())-before, "the compaction was sent again on the new history")
			got, err = session.All(ctx, s2)
			require.NoError(t, err)
			users, n = shape(got)
			assert.Equal(t, []string{`"question 1"`, `"question 2"`, `"question 3"`, `"question 4"`}, users)
			assert.Equal(t, 1, n)
			assert.Len(t, got, 5)
			assert.Empty(t, history.Diagnose(got))
		})
	}
}

// Without a versioned replace the session falls back to Python's
// replacement, and says so.
func TestCompactionFallback(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, e2eScript)
	mem := memSession(t, "conv")
	p := capwrap.Of(mem)
	p.Versioned = nil
	plain := capwrap.Compose(plainCore{mem}, p)
	require.False(t, session.Probe(plain).Has(session.CapVersionedReplace))
	var rep openaigo.CompactionReport
	s := newCompacting(t, plain, api, openaigo.CompactionOptions{Mode: session.CompactionInput, Observe: func(r openaigo.CompactionReport) { rep = r }})
	addTurns(t, s, 1, 3)
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{Force: true}))
	assert.True(t, rep.Fallback)
	got, err := session.All(ctx, s)
	require.NoError(t, err)
	assert.Len(t, got, 4)
}

type plainCore struct{ session.Session }

func (plainCore) AcceptsRunContext() bool    { return false }
func (plainCore) IgnoreIDsForMatching() bool { return false }

// A failed compact request leaves the history as it was; openai-go's
// retries ride over a 429 and a 500.
func TestCompactionRequestFailures(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, e2eScript)
	mem := memSession(t, "conv")
	s := newCompacting(t, mem, api, openaigo.CompactionOptions{Mode: session.CompactionInput})
	addTurns(t, s, 1, 3)
	api.failNext(http.StatusInternalServerError)
	err := compactNow(ctx, s, session.CompactionArgs{ResponseID: "resp_x", Force: true})
	require.Error(t, err)
	got, _ := session.All(ctx, mem)
	assert.Len(t, got, 12, "the history is as it was")
	_, due := s.(session.CompactionDeferrer).DeferredCompaction()
	assert.True(t, due, "the failed compaction is forced at the next turn")

	retrying := newCompacting(t, mem, api, openaigo.CompactionOptions{Mode: session.CompactionInput,
		RequestOptions: []option.RequestOption{option.WithMaxRetries(2), option.WithRequestTimeout(0)}})
	api.failNext(http.StatusTooManyRequests, http.StatusInternalServerError)
	require.NoError(t, compactNow(ctx, retrying, session.CompactionArgs{Force: true}))
	got, _ = session.All(ctx, mem)
	assert.Len(t, got, 4)
}

// A turn another process appended after the model's response was stored
// is not in that response's chain: a compaction by previous_response_id
// would drop it (Python's does). Ours finds its user message missing from
// the output and compacts the stored history instead.
func TestCompactionByResponseKeepsWhatItDidNotSee(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, answerScript)
	client := newClient(api.URL())
	mem := memSession(t, "conv")
	s := newCompacting(t, mem, api, openaigo.CompactionOptions{ShouldCompact: func(openaigo.CompactionContext) bool { return true }})
	addTurns(t, s, 1, 1)
	h := openaigo.New(s, openaigo.Options{})
	params, err := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
	require.NoError(t, err)
	resp, err := client.Responses.New(ctx, params)
	require.NoError(t, err)
	require.NoError(t, session.Append(ctx, mem, noteItems(1))) // another process, while the response was out
	require.NoError(t, h.AddResponse(ctx, resp))

	yes := true
	require.NoError(t, compactNow(ctx, s, session.CompactionArgs{ResponseID: resp.ID, Store: &yes}))
	var got []string
	for _, c := range api.compactions() {
		got = append(got, fmt.Sprintf("previous=%s input=%d", c.Previous, c.Input))
	}
	assert.Equal(t, []string{"previous=resp_001 input=0", "previous= input=7"}, got)
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	users, n := shape(items)
	assert.Equal(t, []string{`"question 1"`, `"note 1"`}, users)
	assert.Equal(t, 1, n)
}

// The compaction session refuses a ConversationsSession, whose history the
// API keeps, with a typed error.
func TestCompactionRefusesConversations(t *testing.T) {
	api := newFakeAPI(t, e2eScript)
	client := newClient(api.URL())
	conv := openaigo.NewConversationsSession(&client, openaigo.ConversationsOptions{})
	_, err := openaigo.NewCompactionSession(conv, &client, openaigo.CompactionOptions{})
	assert.ErrorIs(t, err, openaigo.ErrServerHistory)
}

func ptr[T any](v T) *T { return &v }
