package history

import "github.com/agentsessions/sessions/session"

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

// outputIDFallback lists the outputs whose call may be named in "id"
// instead of "call_id": the API schema's local_shell_call_output (as
// openai-go and the openai Python package type it) has no call_id and
// names its local_shell_call's call_id in "id", while the Python Agents
// SDK writes the call_id in "call_id". call_id wins when both are there.
var outputIDFallback = map[string]bool{
	"local_shell_call_output": true,
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

// AnsweredKey returns the key of the call an output item answers: its
// call_id, or for a local_shell_call_output without one its "id", as the
// API schema names the call there. ok is false for anything else, and for
// an output without a string id.
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
	id := answeredID(it, t)
	return PairKey{c, id}, id != ""
}

// answeredID is the id of the call an output of type t names.
func answeredID(it session.Item, t string) string {
	id := it.CallID()
	if id == "" && outputIDFallback[t] {
		id = it.ID()
	}
	return id
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
	facts := factsOf(items)
	keep := prune(facts, opts, nil)
	dropReasoning(facts, keep, func(i int) bool { return !keep[i] })
	return keep
}

// prune is PruneOrphans without its reasoning rule, over the items present
// (all of them when present is nil): an absent item is not kept and
// answers or names no call.
func prune(facts []facts, opts PruneOptions, present []bool) []bool {
	keep := make([]bool, len(facts))
	outputs := make(map[PairKey]bool)
	calls := make(map[PairKey]bool)
	owned := make(map[string]int) // program call_id -> items it owns
	anonOutputs := 0
	for i, f := range facts {
		if present != nil && !present[i] {
			continue
		}
		switch {
		case f.answers:
			outputs[f.key] = true
		case f.typ == "tool_search_output":
			anonOutputs++
		case f.call && f.hasID:
			calls[f.key] = true
		}
	}
	var programs []int
	for i, f := range facts {
		if present != nil && !present[i] {
			continue
		}
		keep[i] = true
		eligible := opts.CallEligible == nil || opts.CallEligible(i)
		if f.tableCall && eligible {
			switch {
			case f.hasID && outputs[f.key]:
			case f.typ == "tool_search_call" && !f.hasID && anonOutputs > 0:
				anonOutputs-- // matched positionally
			case f.typ == "program":
				programs = append(programs, i) // decided below
			case f.typ == "shell_call" && f.owner != "":
				// a pending hosted shell call inside a program
			default:
				keep[i] = false
			}
		}
		if opts.DropOrphanOutputs && f.answers && !calls[f.key] {
			keep[i] = false
		}
	}
	if len(programs) > 0 {
		for j, f := range facts {
			if f.owner != "" && keep[j] {
				owned[f.owner]++
			}
		}
	}
	drop := func(j int) {
		if keep[j] && facts[j].owner != "" {
			owned[facts[j].owner]--
		}
		keep[j] = false
	}
	for _, p := range programs {
		id := facts[p].key.ID
		active := owned[id]
		if facts[p].owner == id && keep[p] {
			active-- // a program does not keep itself alive
		}
		if id != "" && active > 0 {
			continue
		}
		drop(p)
		if id == "" {
			continue
		}
		for j, f := range facts {
			if f.owner == id {
				drop(j)
			}
		}
	}
	return keep
}

// facts is what pairing needs of one item, read once.
type facts struct {
	typ       string
	key       PairKey // the call's own key, or the key of the call an output answers
	hasID     bool    // key has a non-empty id
	call      bool    // a call of the table or an MCP approval request
	tableCall bool    // a call of the call/output table
	answers   bool    // an output with a non-empty id
	owner     string  // "caller"."caller_id", for items a program owns
	boundary  bool    // a user, developer or system message: no response's item
}

// factsOf reads the facts of every item in one pass.
func factsOf(items []session.Item) []facts {
	out := make([]facts, len(items))
	for i, it := range items {
		f := &out[i]
		f.typ = it.Type()
		switch {
		case f.typ == TypeMCPApprovalRequest:
			f.call = true
			f.key = PairKey{f.typ, it.ID()}
		case f.typ == TypeMCPApprovalResponse:
			id, _ := it.StringField("approval_request_id")
			f.key = PairKey{TypeMCPApprovalRequest, id}
			f.answers = id != ""
		default:
			if _, ok := callOutputTypes[f.typ]; ok {
				f.call, f.tableCall = true, true
				f.key = PairKey{f.typ, it.CallID()}
			} else if c, ok := outputCallTypes[f.typ]; ok {
				f.key = PairKey{c, answeredID(it, f.typ)}
				f.answers = f.key.ID != ""
			} else if f.typ == "" || f.typ == "message" {
				f.boundary = isInputRole(it.Role())
			}
		}
		f.hasID = f.key.ID != ""
		f.owner = callerID(it)
	}
	return out
}

// dropReasoning drops a reasoning item whose next non-reasoning item is
// dropped.
func dropReasoning(facts []facts, keep []bool, dropped func(i int) bool) {
	nextDropped := false
	for i := len(facts) - 1; i >= 0; i-- {
		if facts[i].typ == TypeReasoning {
			if nextDropped {
				keep[i] = false
			}
			continue
		}
		nextDropped = dropped(i)
	}
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

// isInputRole reports whether a message of role role is the caller's (a
// user, developer or system message) rather than a response's.
func isInputRole(role string) bool {
	return role == "user" || role == "developer" || role == "system"
}

func callerID(it session.Item) string {
	raw, ok := it.Field("caller")
	if !ok || raw[0] != '{' {
		return ""
	}
	caller, err := session.NewItem(raw)
	if err != nil {
		return ""
	}
	id, _ := caller.StringField("caller_id")
	return id
}
