package runstate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentsessions/sessions/session"
)

// decodePending validates a pending_session_write member against every
// rule of semantics §3.2 and the key table, and decodes it.
func decodePending(label string, step StepKind, raw json.RawMessage) (*PendingWrite, error) {
	return checkPending(label, step, raw, nil)
}

// checkPending is decodePending; items, when not nil, are the record's
// items as MarshalJSON encoded them (each a valid object already), which
// rule 10 then counts instead of parsing them again.
func checkPending(label string, step StepKind, raw json.RawMessage, items []session.Item) (*PendingWrite, error) {
	bad := func(r rule, format string, args ...any) error {
		return loadErr(ErrInvalidPendingWrite, r, format, args...)
	}
	// Rule 1: the schema.
	if compareSchemas(label, pendingWriteSchema) < 0 {
		return nil, bad(rulePendingSchema, "a pending write needs schema %s or newer, the document is %s", pendingWriteSchema, label)
	}
	// Rule 2: the step.
	if step != StepRunAgain && step != StepInterruption {
		return nil, bad(rulePendingStep, "a pending write needs a run-again or interruption step, the step is %s", stepName(step))
	}
	// Rule 3: an object.
	if jsonKind(raw) != '{' {
		return nil, bad(rulePendingObject, "the record is not a JSON object")
	}
	ms, err := members(raw)
	if err != nil {
		return nil, bad(rulePendingObject, "the record is not a JSON object: %v", err)
	}
	// Rule 4: the exact key set of the label's variant.
	row, err := selectVariant(label, ms)
	if err != nil {
		return nil, err
	}
	w := &PendingWrite{variant: row.Name, label: row.Label}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key)
	}
	if err := checkKeys(label, row, keys); err != nil {
		return nil, err
	}
	get := func(k string) (json.RawMessage, bool) { return lookup(ms, k) }

	// Rule 5: held is a real boolean.
	if v, ok := get("held"); ok {
		b, isBool := jsonBool(v)
		if !isBool {
			return nil, bad(rulePendingHeldType, "held must be true or false, got %s", clip(v))
		}
		w.Held, w.heldKey = b, true
	}
	before, _ := get("before")
	// Rule 6: a held record has no before digests.
	if w.Held && !isNull(before) {
		return nil, bad(rulePendingHeldBefore, "a held record must have a null before, got %s", clip(before))
	}
	if row.Held {
		// Rule 7: the held keys' types.
		if v, ok := get("response_id"); ok {
			if s, isStr := jsonString(v); isStr {
				w.responseID = some(s)
			} else if isNull(v) {
				w.responseID = null[string]()
			} else {
				return nil, bad(rulePendingHeldKeyTypes, "response_id must be a string or null, got %s", clip(v))
			}
		}
		if v, ok := get("store"); ok {
			if b, isBool := jsonBool(v); isBool {
				w.store = some(b)
			} else if isNull(v) {
				w.store = null[bool]()
			} else {
				return nil, bad(rulePendingHeldKeyTypes, "store must be a boolean or null, got %s", clip(v))
			}
		}
		if v, ok := get("reasoning_item_id_policy"); ok {
			p, err := decodePolicy(v)
			if err != nil {
				return nil, bad(rulePendingHeldKeyTypes, "reasoning_item_id_policy %v", err)
			}
			w.policy = p
		}
		// Rule 8: the held keys describe nothing on an ordinary record.
		if !w.Held {
			for _, k := range []string{"response_id", "store", "reasoning_item_id_policy"} {
				if _, ok := get(k); ok {
					return nil, bad(rulePendingHeldOnly, "%s is only allowed on a held record (held is false)", k)
				}
			}
		}
	}
	// Rule 9: session_id.
	sid, _ := get("session_id")
	s, ok := jsonString(sid)
	if !ok {
		return nil, bad(rulePendingSessionID, "session_id must be a string, got %s", clip(sid))
	}
	w.SessionID = s
	// Rule 10: items.
	if items == nil {
		itemsRaw, _ := get("items")
		if items, err = decodeItems(itemsRaw); err != nil {
			return nil, bad(rulePendingItems, "items %v", err)
		}
	}
	if len(items) == 0 {
		return nil, bad(rulePendingItems, "items must not be empty")
	}
	w.Items = items
	// Rule 11: before.
	if !isNull(before) {
		ds, ok := decodeStrings(before)
		if !ok {
			return nil, bad(rulePendingBefore, "before must be null or a list of strings, got %s", clip(before))
		}
		w.Before = ds
	}
	// Rule 12: persisted_count.
	pc, _ := get("persisted_count")
	n, ok := jsonInt(pc)
	if !ok || n < 0 {
		return nil, bad(rulePendingPersistedCount, "persisted_count must be a non-negative int, got %s", clip(pc))
	}
	w.PersistedCount = n
	// The variant's own rules; its unmodelled members ride in extra.
	modelled := map[string]bool{"session_id": true, "items": true, "before": true, "persisted_count": true}
	if row.Held {
		for _, k := range []string{"held", "response_id", "store", "reasoning_item_id_policy"} {
			modelled[k] = true
		}
	}
	for _, m := range ms {
		if !modelled[m.Key] {
			w.extra = append(w.extra, member{Key: m.Key, Value: m.Value})
		}
	}
	if err := validateVariant(row, w); err != nil {
		return nil, err
	}
	return w, nil
}

// selectVariant picks the key-table row of label whose distinguishing keys
// the record carries; with none, the label's ordinary row.
func selectVariant(label string, ms []member) (keyRow, error) {
	var ordinary *keyRow
	for i := range variants {
		v := &variants[i]
		if v.Label != label {
			continue
		}
		if len(v.Distinguishing) == 0 {
			ordinary = v
			continue
		}
		for _, k := range v.Distinguishing {
			if _, ok := lookup(ms, k); ok {
				return *v, nil
			}
		}
	}
	if ordinary == nil {
		return keyRow{}, loadErr(ErrInvalidPendingWrite, rulePendingSchema, "schema %s has no pending-write shape", label)
	}
	return *ordinary, nil
}

// checkKeys is rule 4 (and rule 8 for a record that carries held-only keys
// without the held marker).
func checkKeys(label string, row keyRow, keys []string) error {
	var missing, unexpected []string
	for _, k := range baseKeys {
		if !slices.Contains(keys, k) {
			missing = append(missing, k)
		}
	}
	for _, k := range keys {
		if !slices.Contains(baseKeys, k) && !slices.Contains(row.Optional, k) {
			unexpected = append(unexpected, k)
		}
	}
	if len(missing) == 0 && len(unexpected) == 0 {
		return nil
	}
	sort.Strings(missing)
	sort.Strings(unexpected)
	if len(missing) == 0 && row.Name == variantOrdinary && labelHasHeld(label) && allHeldOnly(unexpected) {
		return loadErr(ErrInvalidPendingWrite, rulePendingHeldOnly,
			"%s only allowed on a held record (no held marker)", strings.Join(unexpected, ", "))
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ", "))
	}
	if len(unexpected) > 0 {
		what := "unexpected " + strings.Join(unexpected, ", ")
		if slices.Contains(unexpected, "held") {
			what += " (the held variant needs schema 1.18 or newer)"
		}
		parts = append(parts, what)
	}
	return loadErr(ErrInvalidPendingWrite, rulePendingKeys, "schema %s %s record: %s", label, row.Name, strings.Join(parts, "; "))
}

func labelHasHeld(label string) bool {
	for _, v := range variants {
		if v.Label == label && v.Held {
			return true
		}
	}
	return false
}

func allHeldOnly(keys []string) bool {
	for _, k := range keys {
		if k != "response_id" && k != "store" && k != "reasoning_item_id_policy" {
			return false
		}
	}
	return len(keys) > 0
}

// validateVariant applies the rules a variant adds to the base rules.
func validateVariant(row keyRow, w *PendingWrite) error {
	bad := func(format string, args ...any) error {
		return loadErr(ErrInvalidPendingWrite, rulePendingVariant, format, args...)
	}
	get := func(k string) (json.RawMessage, bool) { return lookup(w.extra, k) }
	switch row.Name {
	case variantCompaction:
		if v, ok := get("response_id"); ok {
			if _, isStr := jsonString(v); !isStr && !isNull(v) {
				return bad("response_id must be a string or null, got %s", clip(v))
			}
		}
		if v, ok := get("store"); ok {
			if _, isBool := jsonBool(v); !isBool && !isNull(v) {
				return bad("store must be a boolean or null, got %s", clip(v))
			}
		}
		if v, ok := get("has_local_tool_outputs"); ok {
			if _, isBool := jsonBool(v); !isBool {
				return bad("has_local_tool_outputs must be a boolean, got %s", clip(v))
			}
		}
		if v, ok := get("append_acknowledged"); ok {
			if _, isBool := jsonBool(v); !isBool {
				return bad("append_acknowledged must be a boolean, got %s", clip(v))
			}
			if w.Before == nil {
				return bad("append_acknowledged needs non-null before digests")
			}
		}
		if v, ok := get("compaction_model_exchange"); ok {
			ms, err := members(v)
			if err != nil {
				return bad("compaction_model_exchange must be an object")
			}
			d, _ := lookup(ms, "item_digests")
			if _, ok := decodeStrings(d); !ok {
				return bad("compaction_model_exchange.item_digests must be a list of strings, got %s", clip(d))
			}
			if p, ok := lookup(ms, "reasoning_item_id_policy"); ok {
				if _, err := decodePolicy(p); err != nil {
					return bad("compaction_model_exchange.reasoning_item_id_policy %v", err)
				}
			}
		}
	case variantPendingInput:
		v, _ := get("pending_input")
		pending, err := decodeItems(v)
		if err != nil {
			return bad("pending_input %v", err)
		}
		// The batch admits the pending input: every pending item is in it.
		have := map[string]int{}
		for _, it := range w.Items {
			have[string(it.Bytes())]++
		}
		for _, it := range pending {
			if have[string(it.Bytes())] == 0 {
				return bad("pending_input item %s is not in the batch", clip(it.Bytes()))
			}
			have[string(it.Bytes())]--
		}
	case variantHeld:
		if v, ok := get("current_response"); ok {
			ms, err := members(v)
			if err != nil || len(ms) != 2 {
				return bad("current_response must be an object {start, turn}, got %s", clip(v))
			}
			for _, k := range []string{"start", "turn"} {
				n, ok := jsonInt(mustLookup(ms, k))
				if !ok || n < 0 {
					return bad("current_response.%s must be a non-negative int", k)
				}
			}
		}
	}
	return nil
}

func mustLookup(ms []member, k string) json.RawMessage {
	v, _ := lookup(ms, k)
	return v
}

func decodePolicy(v json.RawMessage) (opt[Policy], error) {
	if isNull(v) {
		return null[Policy](), nil
	}
	s, ok := jsonString(v)
	if !ok || !Policy(s).valid() {
		return opt[Policy]{}, fmt.Errorf(`must be "preserve", "omit" or null, got %s`, clip(v))
	}
	return some(Policy(s)), nil
}

// decodeItems decodes a JSON list of objects into compact items.
func decodeItems(v json.RawMessage) ([]session.Item, error) {
	elems, ok := jsonArray(v)
	if !ok {
		return nil, fmt.Errorf("must be a list of objects, got %s", clip(v))
	}
	out := make([]session.Item, 0, len(elems))
	for i, e := range elems {
		if jsonKind(e) != '{' {
			return nil, fmt.Errorf("item %d is not an object: %s", i, clip(e))
		}
		it, err := session.NewItem(compactJSON(e))
		if err != nil {
			return nil, fmt.Errorf("item %d: %v", i, err)
		}
		out = append(out, it)
	}
	return out, nil
}

func decodeStrings(v json.RawMessage) ([]string, bool) {
	elems, ok := jsonArray(v)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := jsonString(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// clip shortens a raw value for an error message.
func clip(v []byte) string {
	if v == nil {
		return "nothing"
	}
	const max = 60
	if len(v) > max {
		return string(v[:max]) + "..."
	}
	return string(v)
}

func stepName(k StepKind) string {
	if k == StepNone {
		return "null"
	}
	return string(k)
}
