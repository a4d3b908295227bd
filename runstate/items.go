package runstate

import "github.com/agentsessions/sessions/session"

// IsConversation reports whether s is Conversations-like (spec §3.8): an
// ID-insensitive session (session.IDInsensitive). Its items are sanitised
// before they are saved and its saves convert with no reasoning-id policy.
func IsConversation(s session.Session) bool { return s != nil && session.IgnoresIDs(s) }

// Convert applies the reasoning-id policy to items: PolicyOmit drops the
// top-level "id" of reasoning items; nil and PolicyPreserve keep items as
// they are. The result shares no memory with items.
func Convert(items []session.Item, policy *Policy) []session.Item { panic("todo") }

// Sanitize returns it as a Conversations backend accepts it (spec §3.8):
// without the SDK metadata keys and provider_data, without the top-level
// "id" unless the type needs one (reasoning, and the listed server item
// types), and never with the "__fake_id__" placeholder id.
func Sanitize(it session.Item) session.Item { panic("todo") }

// Unpersistable reports whether a Conversations backend would not accept
// it: a reasoning item with neither an id nor encrypted_content.
func Unpersistable(it session.Item) bool { panic("todo") }

// DedupeKey returns the dedup key of it (spec §1.5), or ok == false for
// items that are never deduplicated (messages, items with a role, items
// without any id).
func DedupeKey(it session.Item) (key string, ok bool) { panic("todo") }

// Dedupe is deduplicate_input_items_preferring_latest: among items sharing
// a DedupeKey one survives carrying the latest value, at the earliest
// position for an anchor type (tool calls, mcp_approval_request,
// reasoning) and at the latest position otherwise.
func Dedupe(items []session.Item) []session.Item { panic("todo") }
