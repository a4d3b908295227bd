package history

import (
	"encoding/json"

	"github.com/agentsessions/sessions/session"
)

// callOutputTypes is the canonical call → output pairing of the Responses
// API (the Python SDK's _TOOL_CALL_TO_OUTPUT_TYPE), stable across releases.
var callOutputTypes = map[string]string{
	"program":          "program_output",
	"function_call":    "function_call_output",
	"custom_tool_call": "custom_tool_call_output",
	"shell_call":       "shell_call_output",
	"apply_patch_call": "apply_patch_call_output",
	"computer_call":    "computer_call_output",
	"local_shell_call": "local_shell_call_output",
	"tool_search_call": "tool_search_output",
}

var outputCallTypes = func() map[string]string {
	m := make(map[string]string, len(callOutputTypes))
	for c, o := range callOutputTypes {
		m[o] = c
	}
	return m
}()

// Hosted MCP approvals pair outside the call/output table: a request is
// identified by its "id", a response names it in "approval_request_id".
const (
	TypeMCPApprovalRequest  = "mcp_approval_request"
	TypeMCPApprovalResponse = "mcp_approval_response"
	TypeReasoning           = "reasoning"
)

// OutputTypeFor returns the output type that answers a call type.
func OutputTypeFor(callType string) (string, bool) {
	o, ok := callOutputTypes[callType]
	return o, ok
}

// CallTypeFor returns the call type an output type answers.
func CallTypeFor(outputType string) (string, bool) {
	c, ok := outputCallTypes[outputType]
	return c, ok
}

// IsCall reports whether it is a tool call of the call/output table or an
// MCP approval request.
func IsCall(it session.Item) bool {
	t := it.Type()
	_, ok := callOutputTypes[t]
	return ok || t == TypeMCPApprovalRequest
}

// IsOutput reports whether it is a tool output of the call/output table or
// an MCP approval response.
func IsOutput(it session.Item) bool {
	t := it.Type()
	_, ok := outputCallTypes[t]
	return ok || t == TypeMCPApprovalResponse
}

// PairKey identifies a call: its call type and call_id, or for a hosted MCP
// approval ("mcp_approval_request", request id).
type PairKey struct {
	Type string
	ID   string
}

// CallKey returns the key of a call item. ok is false for anything else,
// and for a call without a string id.
func CallKey(it session.Item) (PairKey, bool) {
	t := it.Type()
	if t == TypeMCPApprovalRequest {
		id := it.ID()
		return PairKey{t, id}, id != ""
	}
	if _, ok := callOutputTypes[t]; !ok {
		return PairKey{}, false
	}
	id := it.CallID()
	return PairKey{t, id}, id != ""
}

// AnsweredKey returns the key of the call an output item answers. ok is
// false for anything else, and for an output without a string id.
func AnsweredKey(it session.Item) (PairKey, bool) {
	t := it.Type()
	if t == TypeMCPApprovalResponse {
		id, _ := it.StringField("approval_request_id")
		return PairKey{TypeMCPApprovalRequest, id}, id != ""
	}
	c, ok := outputCallTypes[t]
	if !ok {
		return PairKey{}, false
	}
	id := it.CallID()
	return PairKey{c, id}, id != ""
}

// PruneOptions narrows PruneOrphans.
type PruneOptions struct {
	// CallEligible reports whether the call at index i may be dropped; nil
	// means every call may be (the Python SDK's pruning_indexes).
	CallEligible func(i int) bool
	// DropOrphanOutputs also drops outputs whose call is absent from the
	// list, as a window cut out of a longer history needs.
	DropOrphanOutputs bool
}

// PruneOrphans returns which items survive the canonical orphan prune (the
// Python SDK's drop_orphan_function_calls): a call without an output of its
// mapped type is dropped, a reasoning item whose next non-reasoning item was
// dropped goes with it, and with DropOrphanOutputs an output whose call is
// absent is dropped too. Kept on purpose: an anonymous tool_search_call
// matched positionally by an anonymous output, a program that still owns
// retained items, and a pending shell call owned by a program. Items owned
// by a dropped program (through "caller"."caller_id") are dropped with it.
//
// MCP approval requests are not calls of the table and are never dropped
// here; with DropOrphanOutputs an approval response whose request is absent
// is dropped.
func PruneOrphans(items []session.Item, opts PruneOptions) []bool {
	keep := make([]bool, len(items))
	outputs := make(map[PairKey]bool)
	calls := make(map[PairKey]bool)
	anonOutputs := 0
	for _, it := range items {
		if k, ok := AnsweredKey(it); ok {
			outputs[k] = true
		} else if it.Type() == "tool_search_output" {
			anonOutputs++
		}
		if k, ok := CallKey(it); ok {
			calls[k] = true
		}
	}
	owner := make([]string, len(items))
	var programs []int
	for i, it := range items {
		keep[i] = true
		owner[i] = callerID(it)
		eligible := opts.CallEligible == nil || opts.CallEligible(i)
		t := it.Type()
		if _, isCall := callOutputTypes[t]; isCall && eligible {
			k, hasID := CallKey(it)
			switch {
			case hasID && outputs[k]:
			case t == "tool_search_call" && !hasID && anonOutputs > 0:
				anonOutputs-- // matched positionally
			case t == "program":
				programs = append(programs, i) // decided below
			case t == "shell_call" && owner[i] != "":
				// a pending hosted shell call inside a program
			default:
				keep[i] = false
			}
		}
		if opts.DropOrphanOutputs {
			if k, ok := AnsweredKey(it); ok && !calls[k] {
				keep[i] = false
			}
		}
	}
	for _, p := range programs {
		id := items[p].CallID()
		active := false
		for j := range items {
			if j != p && keep[j] && id != "" && owner[j] == id {
				active = true
				break
			}
		}
		if active {
			continue
		}
		keep[p] = false
		for j := range items {
			if id != "" && owner[j] == id {
				keep[j] = false
			}
		}
	}
	// A reasoning item goes with the dropped item that follows it.
	nextDropped := false
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type() == TypeReasoning {
			if nextDropped {
				keep[i] = false
			}
			continue
		}
		nextDropped = !keep[i]
	}
	return keep
}

// DropOrphanCalls returns the items that survive PruneOrphans with no
// options, in order.
func DropOrphanCalls(items []session.Item) []session.Item {
	return kept(items, PruneOrphans(items, PruneOptions{}))
}

// kept returns the items whose keep flag is set, in order.
func kept(items []session.Item, keep []bool) []session.Item {
	out := make([]session.Item, 0, len(items))
	for i, it := range items {
		if keep[i] {
			out = append(out, it)
		}
	}
	return out
}

func callerID(it session.Item) string {
	raw, ok := it.Field("caller")
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var c struct {
		CallerID *string `json:"caller_id"`
	}
	if json.Unmarshal(raw, &c) != nil || c.CallerID == nil {
		return ""
	}
	return *c.CallerID
}
