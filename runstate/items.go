package runstate

import (
	"encoding/json"
	"hash/maphash"
	"slices"
	"strings"

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
//
// It is session.Probe(s).Has(session.CapIgnoresIDs) without probing every
// other capability: a save asks it of a wrapped session several times.
func isConversation(s session.Session) bool {
	i, ok := s.(session.IDInsensitive)
	return ok && i.IgnoreIDsForMatching()
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
	k, ok := dedupeKeyParts(it, factsOf(it))
	if !ok {
		return "", false
	}
	return k.prefix + k.typ + ":" + k.id, true
}

// facts are the members of an item that a save's passes (the dedup, the
// answered-call check) read, each looked up once: a turn's items are read
// by both.
type facts struct {
	typ    string
	callID string // "call_id" of a call or output (table types), "" if not a string
	role   bool   // a "role" member, looked up unless the type is "message"
	call   bool   // typ is a call type of the call/output table
	output bool   // typ is an output type of the call/output table
}

// factsOf looks up the facts of it.
func factsOf(it session.Item) facts {
	f := facts{typ: it.Type()}
	if f.typ == "message" {
		return f
	}
	if _, f.call = history.OutputTypeFor(f.typ); !f.call {
		_, f.output = history.CallTypeFor(f.typ)
	}
	f.role = it.HasField("role")
	if f.call || f.output {
		f.callID = it.CallID()
	}
	return f
}

// factsFor returns dst with the facts of each item appended.
func factsFor(dst []facts, items []session.Item) []facts {
	for _, it := range items {
		dst = append(dst, factsOf(it))
	}
	return dst
}

// keyParts is a dedup key before it is joined: prefix + typ + ":" + id.
type keyParts struct{ prefix, typ, id string }

func (k keyParts) len() int { return len(k.prefix) + len(k.typ) + 1 + len(k.id) }

// dedupeKeyParts is dedupeKey with the key left in parts, from it and its
// facts f.
func dedupeKeyParts(it session.Item, f facts) (keyParts, bool) {
	typ := f.typ
	if f.role || typ == "message" {
		return keyParts{}, false
	}
	if (f.call || f.output) && f.callID != "" {
		return keyParts{"call_id:", typ, f.callID}, true
	}
	if id, ok := it.StringField("id"); ok && id != "" && id != fakeID {
		return keyParts{"id:", typ, id}, true
	}
	callID := f.callID
	if !f.call && !f.output {
		callID = it.CallID()
	}
	if callID != "" {
		return keyParts{"call_id:", typ, callID}, true
	}
	if id, ok := it.StringField("approval_request_id"); ok && id != "" {
		return keyParts{"approval_request_id:", typ, id}, true
	}
	return keyParts{}, false
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
// kept. fs are the items' facts; the facts of the items kept are returned
// beside them. The caller gives items and fs up: when nothing is dropped
// or moved, they are returned as they are.
func dedupe(items []session.Item, fs []facts) ([]session.Item, []facts) {
	// Per key: the latest item and the position it is kept at.
	type kept struct {
		it  session.Item
		f   facts
		pos int
	}
	// The keys are joined into one string and sliced out of it: one
	// allocation for all of them. A turn's batch is small: its parts and
	// keys fit in arrays on the stack.
	var partsBuf [32]keyParts
	var keysBuf [32]string
	parts, keys := partsBuf[:0], keysBuf[:0]
	if len(items) > len(partsBuf) {
		parts, keys = make([]keyParts, 0, len(items)), make([]string, 0, len(items))
	}
	size := 0
	for i, it := range items {
		k, ok := dedupeKeyParts(it, fs[i])
		if ok {
			size += k.len()
		}
		parts = append(parts, k)
	}
	var all strings.Builder
	all.Grow(size)
	for _, k := range parts {
		if k.prefix != "" {
			all.WriteString(k.prefix)
			all.WriteString(k.typ)
			all.WriteByte(':')
			all.WriteString(k.id)
		}
	}
	joined := all.String()
	at := 0
	for _, k := range parts { // "" for an unkeyed item (no key is empty)
		n := 0
		if k.prefix != "" {
			n = k.len()
		}
		keys = append(keys, joined[at:at+n])
		at += n
	}
	if distinctKeys(keys) {
		return items, fs // nothing to drop or move
	}
	byKey := make(map[string]kept, len(items))
	for i, it := range items {
		k := keys[i]
		if k == "" {
			continue
		}
		e, seen := byKey[k]
		e.it, e.f = it, fs[i]
		if !seen || !anchorType(fs[i].typ) {
			e.pos = i
		}
		byKey[k] = e
	}
	out := make([]session.Item, 0, len(items))
	outFacts := make([]facts, 0, len(items))
	for i, it := range items {
		if keys[i] == "" {
			out, outFacts = append(out, it), append(outFacts, fs[i])
		} else if e := byKey[keys[i]]; e.pos == i {
			out, outFacts = append(out, e.it), append(outFacts, e.f)
		}
	}
	return out, outFacts
}

// distinctKeys reports whether no two non-empty keys are equal. A turn's
// keys go into an open-addressed table on the stack, at most half full;
// more than 32 are sorted.
func distinctKeys(keys []string) bool {
	if len(keys) > 32 {
		sorted := slices.Clone(keys)
		slices.Sort(sorted)
		for i := 1; i < len(sorted); i++ {
			if sorted[i] != "" && sorted[i] == sorted[i-1] {
				return false
			}
		}
		return true
	}
	var table [64]uint8 // 1 + the index of the key in each slot, 0: empty
	for i, k := range keys {
		if k == "" {
			continue
		}
		for j := maphash.String(keySeed, k) & 63; ; j = (j + 1) & 63 {
			e := table[j]
			if e == 0 {
				table[j] = uint8(i + 1)
				break
			}
			if keys[e-1] == k {
				return false
			}
		}
	}
	return true
}

// keySeed seeds distinctKeys' hash.
var keySeed = maphash.MakeSeed()
