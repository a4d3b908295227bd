package runstate

import (
	"slices"
	"strconv"
	"strings"
)

// The labels this package writes (semantics §3.1).
const (
	// pendingWriteSchema is the first label that may carry a pending write
	// and the terminal marker: the released line's 1.17 four-key record.
	pendingWriteSchema = "1.17"
	// heldSchema is the first label that may carry a held record: the PR
	// #4828 line's 1.18.
	heldSchema = "1.18"
)

// schemaSummaries lists every supported label (semantics §3.1), oldest first.
var schemaSummaries = []struct{ label, summary string }{
	{"1.0", "initial HITL snapshot"},
	{"1.1", "same payload, with an explicit backward-read policy"},
	{"1.2", "reasoning_item_id_policy"},
	{"1.3", "resumed trace reattach without duplicate starts"},
	{"1.4", "request_id per model response"},
	{"1.5", "renumbered tool-search baseline and richer tool metadata"},
	{"1.6", "approval rejection messages"},
	{"1.7", "duplicate-name agent identities (agent-owned and sandbox state)"},
	{"1.8", "SDK-generated prompt cache key"},
	{"1.9", "pending custom tool calls and tool origin"},
	{"1.10", "max_turns may be null"},
	{"1.11", "SDK-only custom data on tool outputs"},
	{"1.12", "input cache-write token usage"},
	{"1.13", "programmatic tool calling and nested-handoff history ownership"},
	{"1.14", "hosted MCP approvals scoped by server label"},
	{"1.15", "canonical tool invocation identity, sanitised mount authority, durable pending input, resumable next-model-call state"},
	{"1.16", "Docker network isolation, and an exact per-call approval overriding a sticky decision"},
	{"1.17", "Docker labels; pending resumed Session writes and terminal-unrecoverable runs"},
	{"1.18", "MCP recipient bindings, agent-scoped approvals, and the held pending Session write (PR #4828); also read: main-line compaction metadata and closed PR #4776 pending input"},
	{"1.19", "held pending Session write with current_response (read only; never written unless loaded)"},
}

// supportedSchemas returns every label Load accepts, oldest first.
func supportedSchemas() []string {
	out := make([]string, len(schemaSummaries))
	for i, s := range schemaSummaries {
		out[i] = s.label
	}
	return out
}

// schemaSummary returns the one-line summary of a supported label.
func schemaSummary(label string) (string, bool) {
	if i := schemaIndex(label); i >= 0 {
		return schemaSummaries[i].summary, true
	}
	return "", false
}

// schemaIndex returns the index of label in schemaSummaries, -1 when it is
// not supported. It searches newest first: the labels written most.
func schemaIndex(label string) int {
	for i := len(schemaSummaries) - 1; i >= 0; i-- {
		if schemaSummaries[i].label == label {
			return i
		}
	}
	return -1
}

// schemaVersion is a parsed label, compared numerically on (major, minor).
type schemaVersion struct{ major, minor int }

func parseSchema(label string) (schemaVersion, bool) {
	maj, min, ok := strings.Cut(label, ".")
	if !ok {
		return schemaVersion{}, false
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 0 || b < 0 || strconv.Itoa(a) != maj || strconv.Itoa(b) != min {
		return schemaVersion{}, false
	}
	return schemaVersion{a, b}, true
}

func (v schemaVersion) less(w schemaVersion) bool {
	return v.major < w.major || (v.major == w.major && v.minor < w.minor)
}

// compareSchemas compares two labels numerically on (major, minor): -1, 0
// or +1. Unparseable labels sort before every valid one.
func compareSchemas(a, b string) int {
	va, oka := parseSchema(a)
	vb, okb := parseSchema(b)
	switch {
	case !oka && !okb:
		return strings.Compare(a, b)
	case !oka:
		return -1
	case !okb:
		return 1
	case va.less(vb):
		return -1
	case vb.less(va):
		return 1
	}
	return 0
}

func supported(label string) bool {
	return schemaIndex(label) >= 0
}

// The four keys every pending write carries.
var baseKeys = []string{"session_id", "items", "before", "persisted_count"}

// keyRow is one row of the pending-write key table: the shape a record may
// take under one schema label. A record is matched to the row of its label
// whose Distinguishing keys it carries (the row with none is the label's
// ordinary form); its key set minus the row's Optional keys must then equal
// the four base keys exactly (semantics §3.2 rule 4).
type keyRow struct {
	Label          string   // schema label
	Name           string   // row name, e.g. "ordinary", "held"
	Distinguishing []string // keys whose presence selects this row; empty for the ordinary row
	Optional       []string // keys allowed besides the four base keys
	Held           bool     // whether the row describes a held record
}

// The names PendingWrite.Variant returns: the rows of the pending-write
// key table (semantics §3.1).
const (
	variantOrdinary     = "ordinary"
	variantHeld         = "held"
	variantCompaction   = "compaction-metadata"
	variantPendingInput = "pending-input"
)

// variants is the key table. Adding a shape of semantics §3.1 is adding a row
// (and, where it has rules of its own, a check in validateVariant).
var variants = []keyRow{
	{Label: "1.17", Name: variantOrdinary},
	// PR #4828 reviewed head.
	{Label: "1.18", Name: variantOrdinary},
	{Label: "1.18", Name: variantHeld, Held: true,
		Distinguishing: []string{"held"},
		Optional:       []string{"held", "response_id", "store", "reasoning_item_id_policy"}},
	// main-line alternative (fixture v1_18_compaction_metadata).
	{Label: "1.18", Name: variantCompaction,
		Distinguishing: []string{"has_local_tool_outputs", "append_acknowledged", "compaction_model_exchange"},
		Optional:       []string{"response_id", "store", "has_local_tool_outputs", "append_acknowledged", "compaction_model_exchange"}},
	// closed PR #4776 (fixture v1_18_pending_input_session_write).
	{Label: "1.18", Name: variantPendingInput,
		Distinguishing: []string{"pending_input"},
		Optional:       []string{"pending_input"}},
	// 1.19 (fixture v1_19_held_pending_session_write).
	{Label: "1.19", Name: variantOrdinary},
	{Label: "1.19", Name: variantHeld, Held: true,
		Distinguishing: []string{"held"},
		Optional:       []string{"held", "response_id", "store", "reasoning_item_id_policy", "current_response"}},
}

// keyTable returns a copy of the pending-write key table, row by row.
func keyTable() []keyRow {
	out := make([]keyRow, len(variants))
	for i, v := range variants {
		v.Distinguishing = slices.Clone(v.Distinguishing)
		v.Optional = slices.Clone(v.Optional)
		out[i] = v
	}
	return out
}
