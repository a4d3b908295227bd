package runstate_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/runstate"
)

func TestFixturesLoadAndRoundTripByteForByte(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			raw := fixture(t, name)
			cp, err := runstate.Load(raw)
			require.NoError(t, err)
			out, err := cp.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, canonical(t, raw), canonical(t, out), "structurally identical")
			assert.Equal(t, string(raw), string(out), "byte-identical")
		})
	}
}

func TestFixturesDecode(t *testing.T) {
	t.Run("1.18 held", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_held_pending_session_write.json"))
		require.NoError(t, err)
		assert.Equal(t, "1.18", cp.Schema)
		assert.Equal(t, runstate.StepRunAgain, cp.Step.Kind)
		w := cp.Pending
		require.NotNil(t, w)
		assert.True(t, w.Held)
		assert.Equal(t, runstate.VariantHeld, w.Variant())
		assert.Equal(t, "session-118", w.SessionID)
		assert.Nil(t, w.Before)
		assert.Equal(t, 2, w.PersistedCount)
		assert.Equal(t, runstate.Some("resp_held_1"), w.ResponseIDOpt())
		assert.False(t, w.StoreOpt().Present, "this PR revision predates store")
		assert.False(t, w.PolicyOpt().Present)
		assert.Equal(t, []string{"function_call:call_held_1", "function_call_output:call_held_1"}, types(strs(w.Items)))
	})
	t.Run("1.19 held", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_19_held_pending_session_write.json"))
		require.NoError(t, err)
		assert.Equal(t, "1.19", cp.Schema)
		w := cp.Pending
		require.NotNil(t, w)
		assert.True(t, w.Held)
		assert.False(t, w.ResponseIDOpt().Present)
		assert.Equal(t, []runstate.Member{{Key: "current_response", Value: json.RawMessage(`{"start":0,"turn":0}`)}}, w.Extra())
	})
	t.Run("1.18 compaction metadata", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_compaction_metadata.json"))
		require.NoError(t, err)
		w := cp.Pending
		require.NotNil(t, w)
		assert.False(t, w.Held)
		assert.Equal(t, runstate.VariantCompaction, w.Variant())
		assert.Equal(t, []string{"digest-1", "digest-2"}, w.Before)
		var keys []string
		for _, m := range w.Extra() {
			keys = append(keys, m.Key)
		}
		assert.ElementsMatch(t, []string{"append_acknowledged", "compaction_model_exchange", "has_local_tool_outputs", "response_id", "store"}, keys)
	})
	t.Run("1.18 pending input", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_18_pending_input_session_write.json"))
		require.NoError(t, err)
		require.NotNil(t, cp.Pending)
		assert.Equal(t, runstate.VariantPendingInput, cp.Pending.Variant())
		assert.Equal(t, "compat-session", cp.Pending.SessionID)
	})
	t.Run("minimal", func(t *testing.T) {
		for _, name := range []string{"minimal/v1_18.json", "minimal/v1_19.json"} {
			cp, err := runstate.Load(fixture(t, name))
			require.NoError(t, err)
			assert.Nil(t, cp.Pending)
			assert.Equal(t, runstate.StepNone, cp.Step.Kind)
			assert.Zero(t, cp.PersistedCount)
			assert.False(t, cp.Terminal)
		}
	})
}

// pendingDoc is the held fixture with its label, step and record replaced.
func pendingDoc(t *testing.T, label string, record any) []byte {
	return edit(t, "features/v1_18_held_pending_session_write.json", func(doc map[string]any) {
		doc["$schemaVersion"] = label
		doc["pending_session_write"] = record
	})
}

// ordinary returns a four-key ordinary record plus extra members.
func ordinary(extra map[string]any) map[string]any {
	rec := map[string]any{
		"session_id":      "s1",
		"items":           []any{map[string]any{"type": "function_call_output", "call_id": "c1", "output": "ok"}},
		"before":          []any{"d1", "d2"},
		"persisted_count": 3,
	}
	for k, v := range extra {
		if v == del {
			delete(rec, k)
			continue
		}
		rec[k] = v
	}
	return rec
}

// heldRecord returns a reviewed-head held record plus extra members.
func heldRecord(extra map[string]any) map[string]any {
	rec := ordinary(map[string]any{"before": nil, "held": true, "response_id": "resp_1", "store": nil, "reasoning_item_id_policy": nil})
	for k, v := range extra {
		if v == del {
			delete(rec, k)
			continue
		}
		rec[k] = v
	}
	return rec
}

// del deletes a member in ordinary/heldRecord.
var del = &struct{}{}

func TestLoadRefusals(t *testing.T) {
	withStep := func(step any, rec any) []byte {
		return edit(t, "features/v1_18_held_pending_session_write.json", func(doc map[string]any) {
			doc["current_step"] = step
			doc["pending_session_write"] = rec
		})
	}
	withDoc := func(fn func(doc map[string]any)) []byte {
		return edit(t, "minimal/v1_18.json", fn)
	}
	compaction := func(extra map[string]any) map[string]any {
		base := map[string]any{"response_id": "r", "store": false, "has_local_tool_outputs": true}
		for k, v := range extra {
			base[k] = v
		}
		return ordinary(base)
	}
	cases := []struct {
		name     string
		doc      []byte
		rule     runstate.Rule
		sentinel error
		msg      string
	}{
		// The document and its label.
		{"not JSON", []byte(`{"$schemaVersion": "1.18",`), runstate.RuleDocument, runstate.ErrInvalidDocument, "not valid JSON"},
		{"not an object", []byte(`["1.18"]`), runstate.RuleDocument, runstate.ErrInvalidDocument, "not one JSON object"},
		{"missing label", withDoc(func(d map[string]any) { delete(d, "$schemaVersion") }), runstate.RuleSchema, runstate.ErrUnsupportedSchema, "supported: 1.0, 1.1"},
		{"newer label", withDoc(func(d map[string]any) { d["$schemaVersion"] = "1.20" }), runstate.RuleSchema, runstate.ErrUnsupportedSchema, "1.17, 1.18, 1.19"},
		{"unknown label", withDoc(func(d map[string]any) { d["$schemaVersion"] = "2.0" }), runstate.RuleSchema, runstate.ErrUnsupportedSchema, "supported"},
		{"non-canonical label", withDoc(func(d map[string]any) { d["$schemaVersion"] = "1.018" }), runstate.RuleSchema, runstate.ErrUnsupportedSchema, "supported"},
		{"numeric label", withDoc(func(d map[string]any) { d["$schemaVersion"] = 1.18 }), runstate.RuleSchema, runstate.ErrUnsupportedSchema, "supported"},
		{"step not an object", withDoc(func(d map[string]any) { d["current_step"] = "next_step_run_again" }), runstate.RuleStep, runstate.ErrInvalidDocument, "null or an object"},
		{"unknown step type", withDoc(func(d map[string]any) { d["current_step"] = map[string]any{"type": "next_step_sideways"} }), runstate.RuleStep, runstate.ErrInvalidDocument, "unknown step type"},
		{"negative persisted item count", withDoc(func(d map[string]any) { d["current_turn_persisted_item_count"] = -1 }), runstate.RulePersistedItemCount, runstate.ErrInvalidDocument, "non-negative int"},
		{"float persisted item count", withDoc(func(d map[string]any) { d["current_turn_persisted_item_count"] = 1.5 }), runstate.RulePersistedItemCount, runstate.ErrInvalidDocument, "non-negative int"},
		// The terminal marker.
		{"terminal false", withDoc(func(d map[string]any) { d["terminal_unrecoverable"] = false }), runstate.RuleTerminalMarker, runstate.ErrInvalidTerminalMarker, "must be true"},
		{"terminal string", withDoc(func(d map[string]any) { d["terminal_unrecoverable"] = "true" }), runstate.RuleTerminalMarker, runstate.ErrInvalidTerminalMarker, "must be true"},
		{"terminal under 1.16", withDoc(func(d map[string]any) { d["$schemaVersion"] = "1.16"; d["terminal_unrecoverable"] = true }), runstate.RuleTerminalMarker, runstate.ErrInvalidTerminalMarker, "needs schema 1.17"},
		// §3.2 rule 1.
		{"1: pending write under 1.16", pendingDoc(t, "1.16", ordinary(nil)), runstate.RulePendingSchema, runstate.ErrInvalidPendingWrite, "needs schema 1.17"},
		{"1: pending write under 1.0", pendingDoc(t, "1.0", ordinary(nil)), runstate.RulePendingSchema, runstate.ErrInvalidPendingWrite, "needs schema 1.17"},
		// Rule 2, including the fail-closed mid-final-settle checkpoint.
		{"2: null step", withStep(nil, ordinary(nil)), runstate.RulePendingStep, runstate.ErrInvalidPendingWrite, "the step is null"},
		{"2: final-output step", withStep(map[string]any{"type": "next_step_final_output", "output": "done"}, ordinary(nil)), runstate.RulePendingStep, runstate.ErrInvalidPendingWrite, "next_step_final_output"},
		// Rule 3.
		{"3: a list", pendingDoc(t, "1.18", []any{1}), runstate.RulePendingObject, runstate.ErrInvalidPendingWrite, "not a JSON object"},
		{"3: a string", pendingDoc(t, "1.18", "record"), runstate.RulePendingObject, runstate.ErrInvalidPendingWrite, "not a JSON object"},
		// Rule 4.
		{"4: missing before", pendingDoc(t, "1.18", ordinary(map[string]any{"before": del})), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "missing before"},
		{"4: unknown key", pendingDoc(t, "1.18", ordinary(map[string]any{"extra": 1})), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "unexpected extra"},
		{"4: held under 1.17", pendingDoc(t, "1.17", heldRecord(nil)), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "needs schema 1.18"},
		{"4: bare held key under 1.17", pendingDoc(t, "1.17", ordinary(map[string]any{"held": false})), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "unexpected held"},
		{"4: held with compaction key", pendingDoc(t, "1.18", heldRecord(map[string]any{"has_local_tool_outputs": true})), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "unexpected has_local_tool_outputs"},
		{"4: compaction metadata under 1.17", pendingDoc(t, "1.17", compaction(nil)), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "unexpected"},
		{"4: pending input under 1.17", pendingDoc(t, "1.17", ordinary(map[string]any{"pending_input": []any{}})), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "unexpected pending_input"},
		{"4: current_response under 1.18", pendingDoc(t, "1.18", heldRecord(map[string]any{"current_response": map[string]any{"start": 0, "turn": 0}})), runstate.RulePendingKeys, runstate.ErrInvalidPendingWrite, "unexpected current_response"},
		// Rule 5.
		{"5: held string", pendingDoc(t, "1.18", heldRecord(map[string]any{"held": "true"})), runstate.RulePendingHeldType, runstate.ErrInvalidPendingWrite, "true or false"},
		{"5: held int", pendingDoc(t, "1.18", heldRecord(map[string]any{"held": 1})), runstate.RulePendingHeldType, runstate.ErrInvalidPendingWrite, "true or false"},
		{"5: held null", pendingDoc(t, "1.18", heldRecord(map[string]any{"held": nil})), runstate.RulePendingHeldType, runstate.ErrInvalidPendingWrite, "true or false"},
		// Rule 6.
		{"6: held with before", pendingDoc(t, "1.18", heldRecord(map[string]any{"before": []any{"d1"}})), runstate.RulePendingHeldBefore, runstate.ErrInvalidPendingWrite, "null before"},
		{"6: held with empty before", pendingDoc(t, "1.18", heldRecord(map[string]any{"before": []any{}})), runstate.RulePendingHeldBefore, runstate.ErrInvalidPendingWrite, "null before"},
		{"6: 1.19 held with before", pendingDoc(t, "1.19", heldRecord(map[string]any{"before": []any{"d1"}})), runstate.RulePendingHeldBefore, runstate.ErrInvalidPendingWrite, "null before"},
		// Rule 7.
		{"7: response_id int", pendingDoc(t, "1.18", heldRecord(map[string]any{"response_id": 5})), runstate.RulePendingHeldKeyTypes, runstate.ErrInvalidPendingWrite, "response_id must be a string or null"},
		{"7: store string", pendingDoc(t, "1.18", heldRecord(map[string]any{"store": "yes"})), runstate.RulePendingHeldKeyTypes, runstate.ErrInvalidPendingWrite, "store must be a boolean or null"},
		{"7: unknown policy", pendingDoc(t, "1.18", heldRecord(map[string]any{"reasoning_item_id_policy": "unknown"})), runstate.RulePendingHeldKeyTypes, runstate.ErrInvalidPendingWrite, "reasoning_item_id_policy"},
		{"7: policy bool", pendingDoc(t, "1.18", heldRecord(map[string]any{"reasoning_item_id_policy": true})), runstate.RulePendingHeldKeyTypes, runstate.ErrInvalidPendingWrite, "reasoning_item_id_policy"},
		// Rule 8: variant selection never weakens the PR-line rules.
		{"8: held false with response_id", pendingDoc(t, "1.18", heldRecord(map[string]any{"held": false, "before": []any{}})), runstate.RulePendingHeldOnly, runstate.ErrInvalidPendingWrite, "only allowed on a held record"},
		{"8: response_id without held", pendingDoc(t, "1.18", ordinary(map[string]any{"response_id": "resp_1"})), runstate.RulePendingHeldOnly, runstate.ErrInvalidPendingWrite, "response_id only allowed on a held record"},
		{"8: store without held", pendingDoc(t, "1.18", ordinary(map[string]any{"store": true})), runstate.RulePendingHeldOnly, runstate.ErrInvalidPendingWrite, "store only allowed"},
		{"8: policy without held", pendingDoc(t, "1.18", ordinary(map[string]any{"reasoning_item_id_policy": "omit"})), runstate.RulePendingHeldOnly, runstate.ErrInvalidPendingWrite, "reasoning_item_id_policy only allowed"},
		{"8: response_id and store without held", pendingDoc(t, "1.18", ordinary(map[string]any{"response_id": "r", "store": false})), runstate.RulePendingHeldOnly, runstate.ErrInvalidPendingWrite, "response_id, store only allowed"},
		{"8: 1.19 response_id without held", pendingDoc(t, "1.19", ordinary(map[string]any{"response_id": "resp_1"})), runstate.RulePendingHeldOnly, runstate.ErrInvalidPendingWrite, "only allowed on a held record"},
		// Rules 9 to 12.
		{"9: session_id int", pendingDoc(t, "1.18", ordinary(map[string]any{"session_id": 5})), runstate.RulePendingSessionID, runstate.ErrInvalidPendingWrite, "session_id must be a string"},
		{"9: session_id null", pendingDoc(t, "1.18", ordinary(map[string]any{"session_id": nil})), runstate.RulePendingSessionID, runstate.ErrInvalidPendingWrite, "session_id must be a string"},
		{"10: items string", pendingDoc(t, "1.18", ordinary(map[string]any{"items": "not an item batch"})), runstate.RulePendingItems, runstate.ErrInvalidPendingWrite, "list of objects"},
		{"10: items empty", pendingDoc(t, "1.18", ordinary(map[string]any{"items": []any{}})), runstate.RulePendingItems, runstate.ErrInvalidPendingWrite, "must not be empty"},
		{"10: item not an object", pendingDoc(t, "1.18", ordinary(map[string]any{"items": []any{"x"}})), runstate.RulePendingItems, runstate.ErrInvalidPendingWrite, "item 0 is not an object"},
		{"10: item a list", pendingDoc(t, "1.18", ordinary(map[string]any{"items": []any{map[string]any{}, []any{}}})), runstate.RulePendingItems, runstate.ErrInvalidPendingWrite, "item 1 is not an object"},
		{"11: before string", pendingDoc(t, "1.18", ordinary(map[string]any{"before": "d1"})), runstate.RulePendingBefore, runstate.ErrInvalidPendingWrite, "null or a list of strings"},
		{"11: before ints", pendingDoc(t, "1.18", ordinary(map[string]any{"before": []any{1}})), runstate.RulePendingBefore, runstate.ErrInvalidPendingWrite, "null or a list of strings"},
		{"12: negative count", pendingDoc(t, "1.18", ordinary(map[string]any{"persisted_count": -1})), runstate.RulePendingPersistedCount, runstate.ErrInvalidPendingWrite, "non-negative int"},
		{"12: float count", pendingDoc(t, "1.18", ordinary(map[string]any{"persisted_count": json.Number("2.0")})), runstate.RulePendingPersistedCount, runstate.ErrInvalidPendingWrite, "non-negative int"},
		{"12: bool count", pendingDoc(t, "1.18", ordinary(map[string]any{"persisted_count": true})), runstate.RulePendingPersistedCount, runstate.ErrInvalidPendingWrite, "non-negative int"},
		{"12: string count", pendingDoc(t, "1.18", ordinary(map[string]any{"persisted_count": "2"})), runstate.RulePendingPersistedCount, runstate.ErrInvalidPendingWrite, "non-negative int"},
		// The main-line compaction variant's own rules.
		{"compaction: acknowledgement type", pendingDoc(t, "1.18", compaction(map[string]any{"append_acknowledged": "yes"})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "append_acknowledged must be a boolean"},
		{"compaction: acknowledgement without before", pendingDoc(t, "1.18", compaction(map[string]any{"append_acknowledged": true, "before": nil})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "non-null before"},
		{"compaction: exchange type", pendingDoc(t, "1.18", compaction(map[string]any{"compaction_model_exchange": map[string]any{"item_digests": "not a digest list", "reasoning_item_id_policy": nil}})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "item_digests"},
		{"compaction: exchange policy", pendingDoc(t, "1.18", compaction(map[string]any{"compaction_model_exchange": map[string]any{"item_digests": []any{}, "reasoning_item_id_policy": "unknown"}})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "reasoning_item_id_policy"},
		{"compaction: has_local_tool_outputs type", pendingDoc(t, "1.18", compaction(map[string]any{"has_local_tool_outputs": 1})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "has_local_tool_outputs"},
		{"compaction: store type", pendingDoc(t, "1.18", compaction(map[string]any{"store": "no"})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "store"},
		// The pending-input and 1.19 variants' own rules.
		{"pending input not in the batch", pendingDoc(t, "1.18", ordinary(map[string]any{"pending_input": []any{map[string]any{"role": "user", "content": "Wrong input"}}})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "not in the batch"},
		{"pending input not a list", pendingDoc(t, "1.18", ordinary(map[string]any{"pending_input": "x"})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "pending_input"},
		{"current_response malformed", pendingDoc(t, "1.19", heldRecord(map[string]any{"current_response": map[string]any{"start": -1, "turn": 0}})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "current_response.start"},
		{"current_response not an object", pendingDoc(t, "1.19", heldRecord(map[string]any{"current_response": 3})), runstate.RulePendingVariant, runstate.ErrInvalidPendingWrite, "current_response"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := runstate.Load(tc.doc)
			require.Error(t, err)
			assert.Nil(t, cp)
			var le *runstate.LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.rule, le.Rule, "%v", err)
			assert.ErrorIs(t, err, tc.sentinel)
			assert.Contains(t, err.Error(), tc.sentinel.Error())
			assert.Contains(t, err.Error(), tc.msg)
			// UnmarshalJSON refuses the same way and leaves the value alone.
			keep := runstate.New()
			require.ErrorIs(t, keep.UnmarshalJSON(tc.doc), tc.sentinel)
			assert.Equal(t, "1.17", keep.Schema)
		})
	}
}

func TestLoadAccepts(t *testing.T) {
	cases := []struct {
		name  string
		doc   []byte
		check func(t *testing.T, cp *runstate.Checkpoint)
	}{
		{"1.17 four-key ordinary record keeps its meaning", pendingDoc(t, "1.17", ordinary(nil)), func(t *testing.T, cp *runstate.Checkpoint) {
			require.NotNil(t, cp.Pending)
			assert.False(t, cp.Pending.Held)
			assert.Equal(t, []string{"d1", "d2"}, cp.Pending.Before)
			assert.Equal(t, 3, cp.Pending.PersistedCount)
		}},
		{"1.18 ordinary record", pendingDoc(t, "1.18", ordinary(nil)), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.Equal(t, runstate.VariantOrdinary, cp.Pending.Variant())
		}},
		{"explicit held false is ordinary", pendingDoc(t, "1.18", ordinary(map[string]any{"held": false})), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.False(t, cp.Pending.Held)
		}},
		{"reviewed-head held record", pendingDoc(t, "1.18", heldRecord(map[string]any{"store": false, "reasoning_item_id_policy": "omit"})), func(t *testing.T, cp *runstate.Checkpoint) {
			w := cp.Pending
			assert.True(t, w.Held)
			assert.Equal(t, runstate.Some(false), w.StoreOpt())
			assert.Equal(t, runstate.Some(runstate.PolicyOmit), w.PolicyOpt())
		}},
		{"held record with null store keeps the key", pendingDoc(t, "1.18", heldRecord(nil)), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.Equal(t, runstate.Null[bool](), cp.Pending.StoreOpt())
			assert.Equal(t, runstate.Null[runstate.Policy](), cp.Pending.PolicyOpt())
		}},
		{"empty before list", pendingDoc(t, "1.18", ordinary(map[string]any{"before": []any{}})), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.NotNil(t, cp.Pending.Before)
			assert.Empty(t, cp.Pending.Before)
		}},
		{"null pending write is none", pendingDoc(t, "1.16", nil), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.Nil(t, cp.Pending)
		}},
		{"terminal marker under 1.17", edit(t, "minimal/v1_18.json", func(d map[string]any) { d["$schemaVersion"] = "1.17"; d["terminal_unrecoverable"] = true }), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.True(t, cp.Terminal)
		}},
		{"handoff step is run-again", edit(t, "features/v1_18_held_pending_session_write.json", func(d map[string]any) {
			d["current_step"] = map[string]any{"type": "next_step_handoff", "new_agent": map[string]any{"name": "b"}}
		}), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.Equal(t, runstate.StepRunAgain, cp.Step.Kind)
			assert.NotNil(t, cp.Pending)
			b, err := cp.MarshalJSON()
			require.NoError(t, err)
			assert.Contains(t, string(b), `"current_step": {
    "type": "next_step_run_again"
  }`)
		}},
		{"interruption pending ids", edit(t, "features/v1_18_held_pending_session_write.json", func(d map[string]any) {
			d["current_step"] = map[string]any{"type": "next_step_interruption", "data": map[string]any{"interruptions": []any{
				map[string]any{"raw_item": map[string]any{"type": "function_call", "call_id": "c1", "id": "fc_1"}, "tool_name": "t"},
				map[string]any{"raw_item": map[string]any{"type": "mcp_approval_request", "id": "mcpr_1"}},
				"junk",
			}}}
		}), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.Equal(t, runstate.StepInterruption, cp.Step.Kind)
			assert.Equal(t, []string{"c1", "fc_1", "mcpr_1"}, cp.Step.PendingCallIDs)
		}},
		{"missing persisted item count is 0", edit(t, "minimal/v1_18.json", func(d map[string]any) { delete(d, "current_turn_persisted_item_count") }), func(t *testing.T, cp *runstate.Checkpoint) {
			assert.Zero(t, cp.PersistedCount)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := runstate.Load(tc.doc)
			require.NoError(t, err)
			tc.check(t, cp)
			// Whatever loads writes back to something that loads again, and
			// writing is idempotent.
			b1, err := cp.MarshalJSON()
			require.NoError(t, err)
			back, err := runstate.Load(b1)
			require.NoError(t, err)
			b2, err := back.MarshalJSON()
			require.NoError(t, err)
			assert.Equal(t, string(b1), string(b2))
		})
	}
}

// relabel returns a fixture's exact bytes with its $schemaVersion changed,
// in Python's layout, as the Python corpus builds its canonical
// compatibility fixtures (sources.json: only the label changes).
func relabel(t *testing.T, name, label string) []byte {
	t.Helper()
	raw := fixture(t, name)
	var doc struct {
		Label string `json:"$schemaVersion"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	old := `"$schemaVersion": "` + doc.Label + `"`
	require.Equal(t, 1, bytes.Count(raw, []byte(old)))
	return bytes.Replace(raw, []byte(old), []byte(`"$schemaVersion": "`+label+`"`), 1)
}

// writtenLabel writes cp and returns the label of the written document
// after checking that it loads again.
func writtenLabel(t *testing.T, cp *runstate.Checkpoint) string {
	t.Helper()
	back := roundTrip(t, cp)
	raw, _ := back.Field("$schemaVersion")
	assert.Equal(t, `"`+back.Schema+`"`, string(raw))
	return back.Schema
}

func TestWriteLabel(t *testing.T) {
	t.Run("every Python fixture written back keeps its bytes and label", func(t *testing.T) {
		for _, name := range fixtureNames {
			raw := fixture(t, name)
			cp, err := runstate.Load(raw)
			require.NoError(t, err, name)
			label := cp.Schema
			out, err := cp.MarshalJSON()
			require.NoError(t, err, name)
			assert.Equal(t, string(raw), string(out), "%s: byte-identical", name)
			assert.Equal(t, label, cp.WriteSchema(), name)
		}
	})
	// minimal/v1_18.json was itself emitted by a 1.17 writer and relabelled
	// (sources.json), and carries none of the 1.16+ payloads (Docker,
	// approvals scope, MCP bindings): relabelled 1.15 it is the shape a
	// 1.15 writer produces with no run in flight.
	doc115 := relabel(t, "minimal/v1_18.json", "1.15")
	t.Run("a 1.15 document without a pending write keeps 1.15", func(t *testing.T) {
		cp, err := runstate.Load(doc115)
		require.NoError(t, err)
		require.Nil(t, cp.Pending)
		out, err := cp.MarshalJSON()
		require.NoError(t, err)
		assert.Equal(t, string(doc115), string(out), "byte-identical")
		// A plain save that registers nothing keeps the label too.
		s := newFake(t, "s1")
		cp.SetStep(runstate.StepRunAgain)
		_, err = cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(assistant("a")), Slice: true})
		require.NoError(t, err)
		assert.Equal(t, "1.15", writtenLabel(t, cp))
	})
	t.Run("the key table allows no record under 1.15", func(t *testing.T) {
		_, err := runstate.Load(pendingDoc(t, "1.15", ordinary(nil)))
		assert.ErrorIs(t, err, runstate.ErrInvalidPendingWrite)
		_, err = runstate.Load(edit(t, "minimal/v1_18.json", func(d map[string]any) { d["$schemaVersion"] = "1.15"; d["terminal_unrecoverable"] = true }))
		assert.ErrorIs(t, err, runstate.ErrInvalidTerminalMarker)
		for _, row := range runstate.Variants() {
			assert.GreaterOrEqual(t, runstate.CompareSchemas(row.Label, "1.17"), 0, "row %s/%s", row.Label, row.Name)
		}
	})
	t.Run("an ordinary pending write is written as 1.17", func(t *testing.T) {
		cp, err := runstate.Load(doc115)
		require.NoError(t, err)
		cp.SetStep(runstate.StepRunAgain)
		s := newFake(t, "s1")
		s.fault = failBefore
		_, err = cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true})
		require.ErrorIs(t, err, errBackend)
		require.NotNil(t, cp.Pending)
		b, err := cp.MarshalJSON()
		require.NoError(t, err)
		back, err := runstate.Load(b)
		require.NoError(t, err)
		assert.Equal(t, "1.17", back.Schema)
		assert.Equal(t, runstate.VariantOrdinary, back.Pending.Variant())
		assert.NotContains(t, string(b), `"held"`, "the 1.17 record has exactly the four keys")
		// Settled, the record goes: the live checkpoint is its 1.15 again,
		// and the copy loaded at 1.17 keeps the label it was loaded with.
		_, err = back.Resume(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, "1.17", writtenLabel(t, back))
		_, err = cp.Resume(ctx, newFake(t, "s1"))
		require.NoError(t, err)
		require.Nil(t, cp.Pending)
		assert.Equal(t, "1.15", writtenLabel(t, cp))
	})
	t.Run("a 1.17 record loaded and written back unsettled stays 1.17", func(t *testing.T) {
		cp, err := runstate.Load(pendingDoc(t, "1.17", ordinary(nil)))
		require.NoError(t, err)
		b, err := cp.MarshalJSON()
		require.NoError(t, err)
		back, err := runstate.Load(b)
		require.NoError(t, err)
		assert.Equal(t, "1.17", back.Schema)
		assert.Equal(t, canonical(t, pendingDoc(t, "1.17", ordinary(nil))), canonical(t, b), "nothing else changes")
	})
	t.Run("the terminal marker is written as 1.17", func(t *testing.T) {
		cp, err := runstate.Load(doc115)
		require.NoError(t, err)
		cp.Terminal = true
		assert.Equal(t, "1.17", writtenLabel(t, cp))
	})
	t.Run("a held record is written as 1.18", func(t *testing.T) {
		for _, label := range []string{"1.15", "1.17"} {
			cp, err := runstate.Load(relabel(t, "minimal/v1_18.json", label))
			require.NoError(t, err)
			cp.SetStep(runstate.StepInterruption)
			require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{ResponseID: ptr("resp_1")}))
			back := roundTrip(t, cp)
			assert.Equal(t, "1.18", back.Schema, label)
			assert.True(t, back.Pending.Held)
		}
	})
	t.Run("a 1.19 document stays 1.19", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_19_held_pending_session_write.json"))
		require.NoError(t, err)
		s := newFake(t, "session-118")
		_, err = cp.Resume(ctx, s) // the held batch settles at entry
		require.NoError(t, err)
		require.Nil(t, cp.Pending)
		assert.Equal(t, "1.19", writtenLabel(t, cp))
		cp, err = runstate.Load(fixture(t, "minimal/v1_19.json"))
		require.NoError(t, err)
		cp.SetStep(runstate.StepInterruption)
		require.NoError(t, cp.Park(s, items(call("c1")), runstate.ParkOptions{}))
		assert.Equal(t, "1.19", writtenLabel(t, cp), "never mislabelled older")
	})
	t.Run("a record of a later variant keeps its row's label", func(t *testing.T) {
		cp, err := runstate.Load(fixture(t, "features/v1_19_held_pending_session_write.json"))
		require.NoError(t, err)
		cp.Schema = "1.17" // a caller's mistake: current_response needs 1.19
		assert.Equal(t, "1.19", writtenLabel(t, cp))
	})
	t.Run("new checkpoints are 1.17 until they hold a held record", func(t *testing.T) {
		cp := fresh(runstate.StepInterruption)
		assert.Equal(t, "1.17", writtenLabel(t, cp))
		require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1")), runstate.ParkOptions{}))
		assert.Equal(t, "1.18", writtenLabel(t, cp))
	})
	t.Run("supported labels", func(t *testing.T) {
		labels := runstate.SupportedSchemas()
		assert.Equal(t, "1.0", labels[0])
		assert.Equal(t, "1.19", labels[len(labels)-1])
		for _, l := range labels {
			s, ok := runstate.SchemaSummary(l)
			assert.True(t, ok)
			assert.NotEmpty(t, s, l)
		}
		assert.Equal(t, -1, runstate.CompareSchemas("1.9", "1.10"))
		assert.Equal(t, 1, runstate.CompareSchemas("1.19", "1.18"))
		assert.Equal(t, 0, runstate.CompareSchemas("1.18", "1.18"))
	})
}

func TestUnknownMembersSurviveEdits(t *testing.T) {
	raw := fixture(t, "features/v1_19_held_pending_session_write.json")
	cp, err := runstate.Load(raw)
	require.NoError(t, err)
	cp.Pending.Items = append(cp.Pending.Items, assistant("done"))
	cp.PersistedCount = 1
	cp.Terminal = true
	out, err := cp.MarshalJSON()
	require.NoError(t, err)

	var before, after map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &before))
	require.NoError(t, json.Unmarshal(out, &after))
	for k, v := range before {
		switch k {
		case "pending_session_write", "current_turn_persisted_item_count":
			continue
		}
		assert.Equal(t, canonical(t, v), canonical(t, after[k]), k)
	}
	assert.Equal(t, "true", string(after["terminal_unrecoverable"]))
	var rec map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(after["pending_session_write"], &rec))
	assert.JSONEq(t, `{"start":0,"turn":0}`, string(rec["current_response"]), "the variant's unmodelled keys ride along")
	assert.NotContains(t, rec, "response_id", "absent keys stay absent")
}

func TestCloneAndFields(t *testing.T) {
	cp, err := runstate.Load(fixture(t, "features/v1_18_held_pending_session_write.json"))
	require.NoError(t, err)
	c := cp.Clone()
	c.Pending.Items[0] = user("changed")
	c.Pending.SessionID = "other"
	require.NoError(t, c.SetField("original_input", json.RawMessage(`"changed"`)))
	assert.Equal(t, "session-118", cp.Pending.SessionID)
	assert.Equal(t, "function_call", cp.Pending.Items[0].Type())
	v, ok := cp.Field("original_input")
	require.True(t, ok)
	assert.Equal(t, `"historical input"`, string(v))
	assert.Error(t, cp.SetField("pending_session_write", json.RawMessage(`null`)))
	assert.Error(t, cp.SetField("$schemaVersion", json.RawMessage(`"1.0"`)))
	require.NoError(t, cp.SetField("trace", nil))
	_, ok = cp.Field("trace")
	assert.False(t, ok)
}

func TestCompletedRunCarriesNoRecord(t *testing.T) {
	cp := fresh(runstate.StepRunAgain)
	s := newFake(t, "s1")
	_, err := cp.Save(ctx, s, runstate.SaveArgs{NewItems: items(call("c1"), output("c1")), Register: true, Slice: true})
	require.NoError(t, err)
	cp.SetStep(runstate.StepFinalOutput)
	b, err := cp.MarshalJSON()
	require.NoError(t, err)
	assert.NotContains(t, string(b), "pending_session_write")
	assert.Contains(t, string(b), `"current_step": null`)
	_, err = runstate.Load(b)
	require.NoError(t, err)
}

func TestVariantTable(t *testing.T) {
	rows := runstate.Variants()
	byKey := map[string]runstate.Variant{}
	for _, r := range rows {
		byKey[r.Label+"/"+r.Name] = r
	}
	assert.Empty(t, byKey["1.17/ordinary"].Optional, "1.17 allows only the four base keys")
	assert.Equal(t, []string{"held", "response_id", "store", "reasoning_item_id_policy"}, byKey["1.18/held"].Optional)
	assert.Contains(t, byKey["1.18/compaction-metadata"].Optional, "append_acknowledged")
	assert.Equal(t, []string{"pending_input"}, byKey["1.18/pending-input"].Optional)
	assert.Contains(t, byKey["1.19/held"].Optional, "current_response")
	rows[0].Optional = append(rows[0].Optional, "mutated")
	assert.Empty(t, runstate.Variants()[0].Optional, "the table is returned as a copy")
}

func TestGoCreatedInterruptionStepRoundTrips(t *testing.T) {
	cp := runstate.New()
	cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c2"}}
	require.NoError(t, cp.Park(newFake(t, "s1"), items(call("c1"), call("c2")), runstate.ParkOptions{}))
	back := roundTrip(t, cp)
	assert.Equal(t, runstate.StepInterruption, back.Step.Kind)
	assert.Equal(t, []string{"c2"}, back.Step.PendingCallIDs)
	assert.True(t, back.HasHeld())
}
