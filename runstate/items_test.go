package runstate_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func TestDedupeKey(t *testing.T) {
	cases := []struct {
		item string
		key  string
	}{
		{`{"role":"user","content":"x","id":"m1"}`, ""},
		{`{"type":"message","id":"m1","content":[]}`, ""},
		{`{"type":"function_call","call_id":"c1","id":"fc_1"}`, "call_id:function_call:c1"},
		{`{"type":"function_call_output","call_id":"c1"}`, "call_id:function_call_output:c1"},
		{`{"type":"shell_call_output","call_id":"s1"}`, "call_id:shell_call_output:s1"},
		{`{"type":"reasoning","id":"rs_1"}`, "id:reasoning:rs_1"},
		{`{"type":"reasoning","id":"__fake_id__"}`, ""},
		{`{"type":"web_search_call","id":"ws_1","call_id":"x"}`, "id:web_search_call:ws_1"},
		{`{"type":"hosted_thing","id":"__fake_id__","call_id":"h1"}`, "call_id:hosted_thing:h1"},
		{`{"type":"mcp_approval_request","id":"mcpr_1"}`, "id:mcp_approval_request:mcpr_1"},
		{`{"type":"mcp_approval_response","approval_request_id":"mcpr_1"}`, "approval_request_id:mcp_approval_response:mcpr_1"},
		{`{"type":"reasoning","summary":[]}`, ""},
		{`{"type":"function_call","call_id":5}`, ""},
	}
	for _, tc := range cases {
		key, ok := runstate.DedupeKey(session.MustItem(tc.item))
		assert.Equal(t, tc.key, key, tc.item)
		assert.Equal(t, tc.key != "", ok, tc.item)
	}
}

func TestDedupe(t *testing.T) {
	newer := session.MustItem(`{"type":"function_call","call_id":"c1","name":"write_thing","arguments":"{\"v\":2}"}`)
	newOut := session.MustItem(`{"type":"function_call_output","call_id":"c1","output":"v2"}`)
	got := runstate.Dedupe(items(call("c1"), output("c1"), assistant("a"), assistant("a"), reasoning(""), reasoning(""), newer, newOut))
	assert.Equal(t, []string{
		newer.String(),          // the call keeps its earliest position, with the latest value
		assistant("a").String(), // messages are never deduped
		assistant("a").String(),
		reasoning("").String(), // nor unkeyed reasoning
		reasoning("").String(),
		newOut.String(), // a non-anchor moves to its latest position
	}, strs(got))
	// Reasoning is an anchor.
	got = runstate.Dedupe(items(reasoning("rs_1"), call("c1"), session.MustItem(`{"type":"reasoning","id":"rs_1","summary":["x"]}`)))
	assert.Equal(t, []string{`{"type":"reasoning","id":"rs_1","summary":["x"]}`, call("c1").String()}, strs(got))
}

func TestConvertAndSanitize(t *testing.T) {
	rs := reasoning("rs_1")
	assert.Equal(t, rs.String(), runstate.Convert(items(rs), nil)[0].String())
	assert.Equal(t, rs.String(), runstate.Convert(items(rs), ptr(runstate.PolicyPreserve))[0].String())
	assert.Equal(t, `{"type":"reasoning","summary":[]}`, runstate.Convert(items(rs), ptr(runstate.PolicyOmit))[0].String())
	fc := session.MustItem(`{"type":"function_call","id":"fc_1","call_id":"c1"}`)
	assert.Equal(t, fc.String(), runstate.Convert(items(fc), ptr(runstate.PolicyOmit))[0].String(), "only reasoning loses its id")

	cases := []struct{ in, out string }{
		{`{"type":"function_call","id":"fc_1","call_id":"c1","provider_data":{"a":1},"_agents_tool_description":"d","_agents_tool_title":"t"}`, `{"type":"function_call","call_id":"c1"}`},
		{`{"type":"reasoning","id":"rs_1","encrypted_content":"e"}`, `{"type":"reasoning","id":"rs_1","encrypted_content":"e"}`},
		{`{"type":"reasoning","id":"__fake_id__"}`, `{"type":"reasoning"}`},
		{`{"type":"file_search_call","id":"fs_1"}`, `{"type":"file_search_call","id":"fs_1"}`},
		{`{"type":"program_output","id":"po_1"}`, `{"type":"program_output","id":"po_1"}`},
		{`{"type":"local_shell_call","id":"__fake_id__"}`, `{"type":"local_shell_call"}`},
		{`{"role":"assistant","id":"msg_1","content":"x"}`, `{"role":"assistant","content":"x"}`},
		{`{"type":"message","content":"x"}`, `{"type":"message","content":"x"}`},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.out, runstate.Sanitize(session.MustItem(tc.in)).String(), tc.in)
	}
	assert.True(t, runstate.Unpersistable(session.MustItem(`{"type":"reasoning","summary":[]}`)))
	assert.True(t, runstate.Unpersistable(session.MustItem(`{"type":"reasoning","id":"","encrypted_content":null}`)))
	assert.False(t, runstate.Unpersistable(session.MustItem(`{"type":"reasoning","encrypted_content":"e"}`)))
	assert.False(t, runstate.Unpersistable(session.MustItem(`{"type":"message"}`)))
}

func TestSaveCountsAndSlicing(t *testing.T) {
	t.Run("duplicate outputs dedup to one and count once", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		res, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(output("c1"), output("c1")), Slice: true})
		require.NoError(t, err)
		assert.Equal(t, 1, res.Count)
		assert.Equal(t, 1, cp.PersistedCount)
		assert.Len(t, s.all(t), 1)
	})
	t.Run("a later save of the same turn skips what was persisted", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		turn := items(call("c1"), output("c1"))
		_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: turn[:1], Slice: true})
		require.NoError(t, err)
		_, err = cp.Save(ctx, s, runstate.SaveArgs{NewItems: turn, Slice: true})
		require.NoError(t, err)
		assert.Equal(t, 2, cp.PersistedCount)
		assert.Equal(t, []string{"function_call:c1", "function_call_output:c1"}, types(s.all(t)))
	})
	t.Run("a stale count never loses a tool output", func(t *testing.T) {
		s := newFake(t, "s1")
		cp := fresh(runstate.StepRunAgain)
		cp.PersistedCount = 1
		_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(output("c1"), assistant("done")), Slice: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"function_call_output:c1", "role=assistant"}, types(s.all(t)))
	})
	t.Run("Conversations: sanitised, unpersistable reasoning counted but not sent", func(t *testing.T) {
		f := newFake(t, "conv")
		cp := fresh(runstate.StepRunAgain)
		res, err := cp.Save(ctx, conversation{f}, runstate.SaveArgs{
			NewItems: items(reasoning(""), session.MustItem(`{"type":"message","role":"assistant","id":"msg_1","content":"x"}`)),
			Policy:   ptr(runstate.PolicyOmit), Slice: true})
		require.NoError(t, err)
		assert.Equal(t, 2, res.Count)
		assert.Equal(t, []string{`{"type":"message","role":"assistant","content":"x"}`}, f.all(t))
	})
	t.Run("nothing left to save: no registration, the count advances", func(t *testing.T) {
		s := untouchable{t, "s1"}
		cp := fresh(runstate.StepRunAgain)
		cp.PersistedCount = 2
		res, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Slice: true, Register: true})
		require.NoError(t, err)
		assert.Zero(t, res.Count)
		assert.Nil(t, cp.Pending)
	})
	t.Run("no session: nothing", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		res, err := cp.Save(ctx, nil, runstate.SaveArgs{NewItems: items(call("c1")), Slice: true})
		require.NoError(t, err)
		assert.Zero(t, res.Count)
		assert.Zero(t, cp.PersistedCount)
	})
	t.Run("a new turn resets the count", func(t *testing.T) {
		cp := fresh(runstate.StepRunAgain)
		cp.PersistedCount = 3
		cp.StartTurn()
		assert.Zero(t, cp.PersistedCount)
	})
}

// TestDedupeAgainstReference: Dedupe agrees with a plain reading of its
// rule (one item per key, the latest value, at the earliest position for
// an anchor and the latest otherwise) on random batches of up to 70 items
// drawn from a small pool, so that some batches repeat keys and some do
// not, on both sides of the 32 items a batch's keys are kept on the stack
// for.
func TestDedupeAgainstReference(t *testing.T) {
	pool := items(call("c1"), call("c2"), output("c1"), output("c2"), reasoning("rs_1"), reasoning(""),
		assistant("a"), session.MustItem(`{"type":"function_call","call_id":"c1","name":"later"}`),
		session.MustItem(`{"type":"function_call_output","call_id":"c2","output":"later"}`),
		// One key, "id:a:b:c", split two ways.
		session.MustItem(`{"type":"a:b","id":"c"}`), session.MustItem(`{"type":"a","id":"b:c"}`))
	for i := range 60 {
		pool = append(pool, call(fmt.Sprintf("u%d", i)), output(fmt.Sprintf("u%d", i)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	distinct, repeated := 0, 0
	for range 2000 {
		n := rng.IntN(71)
		batch := make([]session.Item, n)
		small := rng.IntN(2) == 0 // from the first items only: keys repeat
		for i := range batch {
			if small {
				batch[i] = pool[rng.IntN(11)]
			} else {
				batch[i] = pool[11+rng.IntN(len(pool)-11)]
			}
		}
		want := referenceDedupe(batch)
		if len(want) == len(batch) {
			distinct++
		} else {
			repeated++
		}
		require.Equal(t, strs(want), strs(runstate.Dedupe(batch)), "batch %v", strs(batch))
	}
	require.NotZero(t, distinct)
	require.NotZero(t, repeated)
}

// TestDedupeQuickCheck: the batches dedupe tells apart by their keys'
// hashes alone are those without a repeated key, on the cases that check
// must not get wrong: one key split two ways, keys whose hashes are equal
// (the same id, types of one length), a call and its output (one id, two
// keys), a repeated call.
func TestDedupeQuickCheck(t *testing.T) {
	for _, batch := range [][]session.Item{
		items(session.MustItem(`{"type":"a:b","id":"c"}`), assistant("x"), session.MustItem(`{"type":"a","id":"b:c"}`)),
		items(session.MustItem(`{"type":"abc","id":"x"}`), session.MustItem(`{"type":"abd","id":"x"}`)),
		items(session.MustItem(`{"type":"abc","id":"x"}`), session.MustItem(`{"type":"abd","id":"x"}`), session.MustItem(`{"type":"abc","id":"x","v":2}`)),
		items(call("c1"), output("c1"), call("c2"), output("c2")),
		items(call("c1"), output("c1"), session.MustItem(`{"type":"function_call","call_id":"c1","name":"later"}`)),
	} {
		require.Equal(t, strs(referenceDedupe(batch)), strs(runstate.Dedupe(batch)), "batch %v", strs(batch))
	}
}

// TestFactsForAgrees: the facts factsFor copies from an item before of
// the same type are those looked up, on a batch whose types repeat one and
// two items apart, and not at all.
func TestFactsForAgrees(t *testing.T) {
	batch := items(call("c1"), output("c1"), call("c2"), output("c2"), assistant("a"), reasoning("rs_1"),
		session.MustItem(`{"type":"custom_tool_call","call_id":"c3","role":"x"}`), assistant("b"),
		session.MustItem(`{"type":"custom_tool_call_output","call_id":"c3"}`), session.MustItem(`{"id":"untyped"}`),
		session.MustItem(`{"type":7}`), session.MustItem(`{"type":"mcp_approval_request","id":"m1"}`),
		session.MustItem(`{"type":"mcp_approval_response","approval_request_id":"m1"}`), output("c1"), output("c2"))
	require.True(t, runstate.FactsForAgree(batch))
	for i := range batch {
		require.True(t, runstate.FactsForAgree(batch[i:]), "from item %d", i)
	}
}

// TestAnsweredCheckReads: a save reads the session for the answered-call
// check only when an output's call is not in the batch, before or after
// the output.
func TestAnsweredCheckReads(t *testing.T) {
	s := newFake(t, "s1")
	cp := fresh(runstate.StepRunAgain)
	_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(output("c2"), call("c1"), call("c2"), output("c1"))})
	require.NoError(t, err)
	assert.Zero(t, s.reads, "every output's call is in the batch")
	_, err = cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c3"), output("c4"))})
	require.NoError(t, err)
	assert.Equal(t, 1, s.reads, "c4's call is not")
}

// TestItemFacts: the dedup key and the pairing keys the save's passes
// take from an item's facts (each member looked up once), alone and in a
// batch, are those read plainly from the item, on items that take each branch: calls and outputs
// with and without a string call_id, with a role, the outputs whose call
// is named by "id", MCP approvals, messages, the placeholder id.
func TestItemFacts(t *testing.T) {
	var batch []session.Item
	for _, raw := range []string{
		`{"type":"function_call","call_id":"c1","id":"fc_1","name":"f"}`,
		`{"type":"function_call","call_id":"","id":"fc_1"}`,
		`{"type":"function_call","call_id":7,"id":"fc_1"}`,
		`{"type":"function_call","id":"__fake_id__"}`,
		`{"type":"function_call","call_id":"c1","role":"assistant"}`,
		`{"type":"function_call_output","call_id":"c1","output":"x"}`,
		`{"type":"function_call_output","call_id":null,"id":"o1"}`,
		`{"type":"local_shell_call_output","id":"ls_1","output":"x"}`,
		`{"type":"local_shell_call_output","call_id":"ls_2","id":"ls_1"}`,
		`{"type":"computer_call_output","call_id":"cc","role":"tool"}`,
		`{"type":"mcp_approval_request","id":"mr_1","name":"x"}`,
		`{"type":"mcp_approval_request","call_id":"c9"}`,
		`{"type":"mcp_approval_response","approval_request_id":"mr_1","approve":true}`,
		`{"type":"mcp_approval_response","approval_request_id":""}`,
		`{"type":"message","role":"user","content":"hi","id":"m1"}`,
		`{"role":"user","content":"hi"}`,
		`{"type":"reasoning","id":"rs_1","summary":[]}`,
		`{"type":"reasoning","summary":[],"call_id":"c3"}`,
		`{"type":"web_search_call","id":"ws_1","call_id":"c4"}`,
		`{"type":"custom_tool_call","call_id":"ct","id":"ctc"}`,
		`{"type":"custom_tool_call_output","call_id":"ct","output":"y"}`,
		`{"type":"program","approval_request_id":"ar"}`,
		`{"type":"function_call","call_id":"a","call_id":"b"}`,
		`{"type":"function\u005fcall","call_id":"c\u0031"}`,
		`{}`,
	} {
		it := session.MustItem(raw)
		batch = append(batch, it)
		k, ok := runstate.DedupeKey(it)
		wk, wok := referenceDedupeKey(it)
		assert.Equal(t, wok, ok, "%s: keyed", raw)
		assert.Equal(t, wk, k, "%s: key", raw)
		call, isCall, answered, isAnswer := runstate.PairKeysOf(it)
		wc, wIsCall := history.CallKey(it)
		wa, wIsAnswer := history.AnsweredKey(it)
		assert.Equal(t, wIsCall, isCall, "%s: a call", raw)
		assert.Equal(t, wc, call, "%s: call key", raw)
		assert.Equal(t, wIsAnswer, isAnswer, "%s: an output", raw)
		assert.Equal(t, wa, answered, "%s: answered key", raw)
	}
	// The answered check collects the same keys from a batch of them.
	var wantCalls, wantAnswered []history.PairKey
	for _, it := range batch {
		if k, ok := history.CallKey(it); ok {
			wantCalls = append(wantCalls, k)
		}
		if k, ok := history.AnsweredKey(it); ok {
			wantAnswered = append(wantAnswered, k)
		}
	}
	calls, answered := runstate.BatchPairKeys(batch)
	assert.Equal(t, wantCalls, calls)
	assert.Equal(t, wantAnswered, answered)
}

// referenceDedupeKey is the dedup key of semantics §1.5 read plainly from
// the item, member by member.
func referenceDedupeKey(it session.Item) (string, bool) {
	typ := it.Type()
	if it.HasField("role") || typ == "message" {
		return "", false
	}
	_, isCall := history.OutputTypeFor(typ)
	_, isOutput := history.CallTypeFor(typ)
	callID, _ := it.StringField("call_id")
	if (isCall || isOutput) && callID != "" {
		return "call_id:" + typ + ":" + callID, true
	}
	if id, ok := it.StringField("id"); ok && id != "" && id != "__fake_id__" {
		return "id:" + typ + ":" + id, true
	}
	if callID != "" {
		return "call_id:" + typ + ":" + callID, true
	}
	if id, ok := it.StringField("approval_request_id"); ok && id != "" {
		return "approval_request_id:" + typ + ":" + id, true
	}
	return "", false
}

// referenceDedupe is Dedupe's rule read plainly, in quadratic time.
func referenceDedupe(batch []session.Item) []session.Item {
	var out []session.Item
	for i, it := range batch {
		k, ok := runstate.DedupeKey(it)
		if !ok {
			out = append(out, it)
			continue
		}
		var same []int
		for j, o := range batch {
			if ko, ok := runstate.DedupeKey(o); ok && ko == k {
				same = append(same, j)
			}
		}
		pos := same[len(same)-1]
		if runstate.AnchorType(it.Type()) {
			pos = same[0]
		}
		if pos == i {
			out = append(out, batch[same[len(same)-1]])
		}
	}
	return out
}
