//lint:file-ignore ST1005 the error texts are the Python SDK's exact messages (semantics §3.9), matched by tests and by users.

package runstate

import (
	"errors"
	"fmt"
)

// Load-time sentinels. Every error Load returns is a *LoadError wrapping
// one of them.
var (
	// ErrInvalidDocument reports a document that is not one JSON object,
	// or whose modelled members have the wrong shape.
	ErrInvalidDocument = errors.New("Run state document is invalid")
	// ErrInvalidPendingWrite reports a pending_session_write member that
	// breaks a rule of semantics §3.2.
	ErrInvalidPendingWrite = errors.New("Run state pending Session write is invalid")
	// ErrInvalidTerminalMarker reports a terminal_unrecoverable member other
	// than true, or one under a schema below 1.17.
	ErrInvalidTerminalMarker = errors.New("Run state terminal marker is invalid")
	// ErrUnsupportedSchema reports a missing, malformed, unknown or newer
	// $schemaVersion; the message lists the supported labels.
	ErrUnsupportedSchema = errors.New("Run state schema version is not supported")
)

// Runtime errors (semantics §3.9), with the Python SDK's exact texts.
var (
	// ErrSlotOccupied: a batch was registered while another record stands.
	ErrSlotOccupied = errors.New("Resolve the pending Session write before saving another batch")
	// ErrWriteInProgress: a settle of this checkpoint's record is running.
	ErrWriteInProgress = errors.New("The pending Session write is already in progress for this RunState")
	// ErrWrongSession: the session is missing (ordinary record) or is not
	// the one the record was registered on.
	ErrWrongSession = errors.New("Resume the pending Session write with the original Session and session ID")
	// ErrCannotReconcile: the session tail proves neither that the append
	// committed nor that it did not. Nothing is written.
	ErrCannotReconcile = errors.New("Cannot reconcile the pending Session write: history changed or is ambiguous. Repair the original Session before resuming; do not rerun the completed tool.")
	// ErrTerminal: the checkpoint is marked terminal_unrecoverable.
	ErrTerminal = errors.New("This run state is terminal and cannot be resumed")
	// ErrBoundaryUnproven: first output-guardrail gate error (semantics §3.5.7).
	ErrBoundaryUnproven = errors.New("Cannot resume a serialized approval checkpoint with output guardrails because the current response boundary cannot be proven. Start a new run from safe input.")
	// ErrPersistedBeforeGate: second output-guardrail gate error (semantics §3.5.7).
	ErrPersistedBeforeGate = errors.New("Cannot resume an approval checkpoint with output guardrails after current-turn items were persisted. Start a new run from safe input.")
)

// Rule names a load-time validation rule. The values are stable and are
// what LoadError.Rule holds.
type Rule string

// The load-time rules. The PendingWrite* rules are semantics §3.2's numbered
// rules; the others cover the rest of the document.
const (
	RuleDocument              Rule = "document"                          // not one JSON object / bad modelled member
	RuleSchema                Rule = "schema"                            // unknown, newer, missing or malformed label
	RuleStep                  Rule = "current_step"                      // current_step malformed
	RulePersistedItemCount    Rule = "current_turn_persisted_item_count" // not a non-negative int
	RuleTerminalMarker        Rule = "terminal_unrecoverable"            // not true, or below 1.17
	RulePendingSchema         Rule = "pending.schema"                    // §3.2.1 record under a label below 1.17
	RulePendingStep           Rule = "pending.step"                      // §3.2.2 step not run-again / interruption
	RulePendingObject         Rule = "pending.object"                    // §3.2.3 not an object
	RulePendingKeys           Rule = "pending.keys"                      // §3.2.4 exact key set for the label and variant
	RulePendingHeldType       Rule = "pending.held_type"                 // §3.2.5 held not a real boolean
	RulePendingHeldBefore     Rule = "pending.held_before"               // §3.2.6 held with non-null before
	RulePendingHeldKeyTypes   Rule = "pending.held_key_types"            // §3.2.7 response_id/store/policy types
	RulePendingHeldOnly       Rule = "pending.held_only"                 // §3.2.8 held keys on an ordinary record
	RulePendingSessionID      Rule = "pending.session_id"                // §3.2.9
	RulePendingItems          Rule = "pending.items"                     // §3.2.10
	RulePendingBefore         Rule = "pending.before"                    // §3.2.11
	RulePendingPersistedCount Rule = "pending.persisted_count"           // §3.2.12
	RulePendingVariant        Rule = "pending.variant"                   // a variant's own rules (compaction metadata, pending input, current_response)
)

// LoadError is the error Load returns: which rule failed, a message, and
// the sentinel it wraps (errors.Is works with the sentinels above).
type LoadError struct {
	Rule Rule   // the rule that failed
	Msg  string // what was wrong, for humans
	Err  error  // the sentinel: ErrInvalidDocument, ErrInvalidPendingWrite, ErrInvalidTerminalMarker or ErrUnsupportedSchema
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("%v (%s): %s", e.Err, e.Rule, e.Msg)
}

// Unwrap returns the sentinel.
func (e *LoadError) Unwrap() error { return e.Err }

func loadErr(sentinel error, rule Rule, format string, args ...any) *LoadError {
	return &LoadError{Rule: rule, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}
