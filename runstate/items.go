package runstate

import (
	"encoding/json"
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

// forSession converts items for saving to a session, Conversations-like
// when conversation (isConversation): policy applied (forced to nil for a
// Conversations-like session).
func forSession(conversation bool, items []session.Item, policy *Policy) []session.Item {
	if conversation {
		policy = nil
	}
	return convert(items, policy)
}

// dedupeKey returns the dedup key of it (semantics §1.5), or ok == false for
// items that are never deduplicated (messages, items with a role, items
// without any id).
func dedupeKey(it session.Item) (key string, ok bool) {
	f := factsOf(it)
	k, ok := dedupeKeyParts(it, &f)
	if !ok {
		return "", false
	}
	return k.prefix + k.typ + ":" + k.id, true
}

// facts are the members of an item that a save's passes (the dedup, the
// answered-call check) read, looked up together in one pass: a turn's items
// are read by both.
type facts struct {
	typ     string
	callID  string // "call_id", "" if not a string
	answers string // the call type an output answers, "" unless output
	role    bool   // a "role" member
	call    bool   // typ is a call type of the call/output table
	output  bool   // typ is an output type of the call/output table
}

// factsOf looks up the facts of it.
func factsOf(it session.Item) facts {
	var f facts
	f.typ, f.callID, f.role = it.TypeCallRole()
	f.setTypeFacts()
	return f
}

// setTypeFacts sets the facts that follow from f.typ alone.
func (f *facts) setTypeFacts() {
	if f.typ == "message" {
		return
	}
	if _, f.call = history.OutputTypeFor(f.typ); !f.call {
		f.answers, f.output = history.CallTypeFor(f.typ)
	}
}

// factsFor returns dst with the facts of each item appended. A turn
// mostly alternates a call type and its output type: the facts of an
// item of the type of one of the two items before it are copied from
// there, not looked up in the call/output table.
func factsFor(dst []facts, items []session.Item) []facts {
	for i, it := range items {
		var f facts
		f.typ, f.callID, f.role = it.TypeCallRole()
		switch n := len(dst); {
		case i > 0 && dst[n-1].typ == f.typ:
			f.answers, f.call, f.output = dst[n-1].answers, dst[n-1].call, dst[n-1].output
		case i > 1 && dst[n-2].typ == f.typ:
			f.answers, f.call, f.output = dst[n-2].answers, dst[n-2].call, dst[n-2].output
		default:
			f.setTypeFacts()
		}
		dst = append(dst, f)
	}
	return dst
}

// keyParts is a dedup key before it is joined: prefix + typ + ":" + id.
type keyParts struct{ prefix, typ, id string }

// canonical returns k split at the first ':' after its prefix, so that two
// keys are equal as parts exactly when they are joined: the prefixes end
// in ':' and begin with different bytes, so only a type holding ':' can
// split one joined key two ways.
func (k keyParts) canonical() keyParts {
	if i := strings.IndexByte(k.typ, ':'); i >= 0 {
		return keyParts{k.prefix, k.typ[:i], k.typ[i+1:] + ":" + k.id}
	}
	return k
}

// hash is the hash distinctQuick and distinctKeys put k under, the table
// slot in its top bits: the first and last eight bytes of its id and the
// lengths of its parts (which tell a call's key from its output's). Ids
// are mostly random at one end or the other; keys that share a hash cost
// only speed (distinctQuick hands them to the full comparison).
func (k keyParts) hash() uint64 {
	id := k.id
	h := uint64(len(k.prefix)<<16 | len(k.typ)<<8 | len(id)&0xff)
	if len(id) >= 8 {
		h ^= le64(id[:8])*0x9e3779b97f4a7c15 ^ le64(id[len(id)-8:])
	} else {
		for i := 0; i < len(id); i++ {
			h = h<<8 ^ uint64(id[i])
		}
	}
	return h * 0xbf58476d1ce4e5b9
}

// le64 is the little-endian uint64 of the eight bytes of s.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// dedupeKeyParts is dedupeKey with the key left in parts, from it and its
// facts f.
func dedupeKeyParts(it session.Item, f *facts) (keyParts, bool) {
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
	if f.callID != "" {
		return keyParts{"call_id:", typ, f.callID}, true
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
	if len(items) <= maxQuick && distinctQuick(items, fs) {
		return items, fs // nothing to drop or move
	}
	return dedupeKeys(items, fs)
}

// maxQuick is the most items distinctQuick takes.
const maxQuick = 32

// distinctQuick reports whether no two of at most maxQuick items share a
// dedup key, telling the keys apart by their hashes alone: it is false
// (dedupeKeys decides) when two hashes are equal, or when a type holds
// ':', which would make the hash of one key depend on how it splits.
func distinctQuick(items []session.Item, fs []facts) bool {
	var hashes [maxQuick]uint64
	var table [64]uint8 // 1 + the index of the item in each slot, 0: empty; at most half full
	for i, it := range items {
		f := &fs[i]
		var k keyParts
		switch {
		case f.role || f.typ == "message": // dedupeKeyParts' first two rules
			continue
		case (f.call || f.output) && f.callID != "":
			k = keyParts{"call_id:", f.typ, f.callID}
		default:
			var ok bool
			if k, ok = dedupeKeyParts(it, f); !ok {
				continue
			}
		}
		if strings.IndexByte(k.typ, ':') >= 0 {
			return false
		}
		h := k.hash()
		hashes[i] = h
		for j := h >> 58; ; j = (j + 1) & 63 { // from the slot in h's top 6 bits
			e := table[j]
			if e == 0 {
				table[j] = uint8(i + 1)
				break
			}
			if hashes[e-1] == h {
				return false
			}
		}
	}
	return true
}

// dedupeKeys is dedupe with the keys compared in full.
func dedupeKeys(items []session.Item, fs []facts) ([]session.Item, []facts) {
	// Per key: the latest item and the position it is kept at.
	type kept struct {
		it  session.Item
		f   facts
		pos int
	}
	// The keys stay in parts, never joined. A turn's batch is small: its
	// keys fit in an array on the stack.
	var keysBuf [32]keyParts
	keys := keysBuf[:0]
	if len(items) > len(keysBuf) {
		keys = make([]keyParts, 0, len(items))
	}
	for i, it := range items {
		k, _ := dedupeKeyParts(it, &fs[i]) // the zero key for an unkeyed item
		keys = append(keys, k.canonical())
	}
	if distinctKeys(keys) {
		return items, fs // nothing to drop or move
	}
	byKey := make(map[keyParts]kept, len(items))
	for i, it := range items {
		k := keys[i]
		if k == (keyParts{}) {
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
		if keys[i] == (keyParts{}) {
			out, outFacts = append(out, it), append(outFacts, fs[i])
		} else if e := byKey[keys[i]]; e.pos == i {
			out, outFacts = append(out, e.it), append(outFacts, e.f)
		}
	}
	return out, outFacts
}

// distinctKeys reports whether no two non-zero keys, all canonical, are
// equal. A turn's keys go into an open-addressed table on the stack, at
// most half full; more than 32 go into a map.
func distinctKeys(keys []keyParts) bool {
	if len(keys) > 32 {
		seen := make(map[keyParts]bool, len(keys))
		for _, k := range keys {
			if k == (keyParts{}) {
				continue
			}
			if seen[k] {
				return false
			}
			seen[k] = true
		}
		return true
	}
	var table [64]uint8 // 1 + the index of the key in each slot, 0: empty
	for i, k := range keys {
		if k == (keyParts{}) {
			continue
		}
		for j := k.hash() >> 58; ; j = (j + 1) & 63 { // from the slot in h's top 6 bits
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
