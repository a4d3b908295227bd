package runstate

import (
	"slices"

	"github.com/agentsessions/sessions/session"
)

// SanitizeForConversations returns items as the Python SDK hands them to a
// Conversations backend (semantics §3.8), the rules a Run applies when it
// saves to an ID-insensitive session (session.IDInsensitive): each item
// without the SDK metadata keys and provider_data, without its top-level
// "id" unless its type's create-item schema needs one (reasoning,
// file_search_call, web_search_call, computer_call, code_interpreter_call,
// image_generation_call, local_shell_call, local_shell_call_output,
// mcp_list_tools, mcp_approval_request, mcp_call, item_reference, program,
// program_output), never with the "__fake_id__" placeholder id; and a
// reasoning item with neither an id nor encrypted_content left out, as
// dropped counts. An item that needs no change keeps its bytes. Applying
// it twice changes nothing more.
func SanitizeForConversations(items []session.Item) (out []session.Item, dropped int) {
	out = slices.DeleteFunc(mapItems(items, sanitize), unpersistable)
	return out, len(items) - len(out)
}
