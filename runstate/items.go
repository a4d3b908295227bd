package runstate

import (
	"encoding/json"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// isConversation reports whether s is Conversations-like (semantics §3.8): an
// ID-insensitive session (session.IDInsensitive). Its items are sanitised
// before they are saved and its saves convert with no reasoning-id policy.
//
// The Python SDK keys sanitisation on the Conversations class and digest
// id-insensitivity on a separate attribute; in Go one capability says both,
// because a backend that rewrites ids is exactly one whose stale ids must
// not be sent back.
func isConversation(s session.Session) bool {
	return s != nil && session.Probe(s).Has(session.CapIgnoresIDs)
}

// fakeID is the SDK's placeholder id for providers that assign none.
const fakeID = "__fake_id__"

// conversationIDTypes are the types whose Conversations create-item schema
// requires the top-level id.
var conversationIDTypes = map[string]bool{
	"file_search_call": true, "web_search_call": true, "computer_call": true,
	"code_interpreter_call": true, "image_generation_call": true,
	"local_shell_call": true, "local_shell_call_output": true,
	"mcp_list_tools": true, "mcp_approval_request": true, "mcp_call": true,
	"item_reference": true, "program": true, "program_output": true,
}

// without returns it minus the top-level members drop selects; it is
// returned unchanged (same bytes) when nothing is dropped.
func without(it session.Item, drop func(key string, v json.RawMessage) bool) session.Item {
	ms, err := members(it.Bytes())
	if err != nil {
		return it
	}
	kept := ms[:0:0]
	for _, m := range ms {
		if !drop(m.Key, m.Value) {
			kept = append(kept, m)
		}
	}
	if len(kept) == len(ms) {
		return it
	}
	out, err := session.NewItem(encodeObject(kept))
	if err != nil {
		return it
	}
	return out
}

// convert applies the reasoning-id policy to items: PolicyOmit drops the
// top-level "id" of reasoning items; nil and PolicyPreserve keep items as
// they are. The result is a new slice; unchanged items keep their bytes.
func convert(items []session.Item, policy *Policy) []session.Item {
	out := make([]session.Item, len(items))
	for i, it := range items {
		if policy != nil && *policy == PolicyOmit && it.Type() == history.TypeReasoning {
			it = without(it, func(k string, _ json.RawMessage) bool { return k == "id" })
		}
		out[i] = it
	}
	return out
}

// sanitize returns it as a Conversations backend accepts it (semantics §3.8):
// without the SDK metadata keys and provider_data, without the top-level
// "id" unless the type needs one (reasoning, and the listed server item
// types), and never with the "__fake_id__" placeholder id.
func sanitize(it session.Item) session.Item {
	typ := it.Type()
	keepID := typ == history.TypeReasoning || conversationIDTypes[typ]
	return without(it, func(k string, v json.RawMessage) bool {
		switch k {
		case history.MetaToolDescription, history.MetaToolTitle, "provider_data":
			return true
		case "id":
			if s, ok := jsonString(v); ok && s == fakeID {
				return true
			}
			return !keepID
		}
		return false
	})
}

// unpersistable reports whether a Conversations backend would not accept
// it: a reasoning item with neither an id nor encrypted_content (counted,
// never sent).
func unpersistable(it session.Item) bool {
	if it.Type() != history.TypeReasoning {
		return false
	}
	return !truthy(it, "id") && !truthy(it, "encrypted_content")
}

// truthy is Python's bool(item.get(key)) for JSON values.
func truthy(it session.Item, key string) bool {
	v, ok := it.Field(key)
	if !ok {
		return false
	}
	switch string(v) {
	case "null", "false", `""`, "0", "[]", "{}":
		return false
	}
	if jsonKind(v) == '0' {
		var f float64
		if json.Unmarshal(v, &f) == nil && f == 0 {
			return false
		}
	}
	return true
}

// forSession converts items for saving to s: policy applied (forced to
// nil for a Conversations-like session).
func forSession(s session.Session, items []session.Item, policy *Policy) []session.Item {
	if isConversation(s) {
		policy = nil
	}
	return convert(items, policy)
}

// dedupeKey returns the dedup key of it (semantics §1.5), or ok == false for
// items that are never deduplicated (messages, items with a role, items
// without any id).
func dedupeKey(it session.Item) (key string, ok bool) {
	typ := it.Type()
	if it.HasField("role") || typ == "message" {
		return "", false
	}
	_, isCall := history.OutputTypeFor(typ)
	_, isOutput := history.CallTypeFor(typ)
	callID, hasCallID := it.StringField("call_id")
	hasCallID = hasCallID && callID != ""
	if (isCall || isOutput) && hasCallID {
		return "call_id:" + typ + ":" + callID, true
	}
	if id, ok := it.StringField("id"); ok && id != "" && id != fakeID {
		return "id:" + typ + ":" + id, true
	}
	if hasCallID {
		return "call_id:" + typ + ":" + callID, true
	}
	if id, ok := it.StringField("approval_request_id"); ok && id != "" {
		return "approval_request_id:" + typ + ":" + id, true
	}
	return "", false
}

// anchorType reports whether items of type t keep the earliest position of
// their dedup key: tool calls, MCP approval requests and reasoning items,
// so a call never moves behind its output.
func anchorType(t string) bool {
	_, isCall := history.OutputTypeFor(t)
	return isCall || t == history.TypeMCPApprovalRequest || t == history.TypeReasoning
}

// dedupe is deduplicate_input_items_preferring_latest: among items sharing
// a dedupeKey one survives carrying the latest value, at the earliest
// position for an anchor type (tool calls, mcp_approval_request,
// reasoning) and at the latest position otherwise. Unkeyed items are all
// kept.
func dedupe(items []session.Item) []session.Item {
	keys := make([]string, len(items))
	has := make([]bool, len(items))
	latest := map[string]session.Item{}
	pos := map[string]int{}
	for i, it := range items {
		k, ok := dedupeKey(it)
		if !ok {
			continue
		}
		keys[i], has[i] = k, true
		latest[k] = it
		if _, seen := pos[k]; !seen || !anchorType(it.Type()) {
			pos[k] = i
		}
	}
	out := make([]session.Item, 0, len(items))
	for i, it := range items {
		switch {
		case !has[i]:
			out = append(out, it)
		case pos[keys[i]] == i:
			out = append(out, latest[keys[i]])
		}
	}
	return out
}
