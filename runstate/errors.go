package runstate

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a runstate error that the Python SDK raises too. Its Error text
// is Go's; Python holds the Python SDK's exact sentence (semantics §3.9),
// for a caller that must show or match what Python says.
type Error struct {
	msg string
	// Python is the Python SDK's message for the same condition.
	Python string
}

func (e *Error) Error() string { return e.msg }

// Load-time sentinels. Every error Load returns is a *LoadError wrapping
// one of them.
var (
	// ErrInvalidDocument reports a document that is not one JSON object,
	// or whose modelled members have the wrong shape.
	ErrInvalidDocument = &Error{"runstate: invalid run state document", "Run state document is invalid"}
	// ErrInvalidPendingWrite reports a pending_session_write member that
	// breaks a rule of semantics §3.2.
	ErrInvalidPendingWrite = &Error{"runstate: invalid pending session write", "Run state pending Session write is invalid"}
	// ErrInvalidTerminalMarker reports a terminal_unrecoverable member other
	// than true, or one under a schema below 1.17.
	ErrInvalidTerminalMarker = &Error{"runstate: invalid terminal marker", "Run state terminal marker is invalid"}
	// ErrUnsupportedSchema reports a missing, malformed, unknown or newer
	// $schemaVersion; the message lists the supported labels.
	ErrUnsupportedSchema = &Error{"runstate: unsupported schema version", "Run state schema version is not supported"}
)

// Runtime errors the Python SDK raises too (semantics §3.9).
var (
	// ErrSlotOccupied: a batch was registered while another record stands.
	ErrSlotOccupied = &Error{"runstate: another pending session write stands; resolve it before saving another batch",
		"Resolve the pending Session write before saving another batch"}
	// ErrWriteInProgress: a settle of this checkpoint's record is running.
	ErrWriteInProgress = &Error{"runstate: the pending session write is already being settled",
		"The pending Session write is already in progress for this RunState"}
	// ErrWrongSession: the session is missing (ordinary record) or is not
	// the one the record was registered on.
	ErrWrongSession = &Error{"runstate: the pending session write must be resumed with its own session",
		"Resume the pending Session write with the original Session and session ID"}
	// ErrCannotReconcile: the session tail proves neither that the append
	// committed nor that it did not. Nothing is written.
	ErrCannotReconcile = &Error{"runstate: cannot reconcile the pending session write: the history changed or is ambiguous; repair the session before resuming, and do not rerun the completed tool",
		"Cannot reconcile the pending Session write: history changed or is ambiguous. Repair the original Session before resuming; do not rerun the completed tool."}
	// ErrTerminal: the checkpoint is marked terminal_unrecoverable.
	ErrTerminal = &Error{"runstate: the run state is terminal and cannot be resumed",
		"This run state is terminal and cannot be resumed"}
	// ErrBoundaryUnproven: first output-guardrail gate error (semantics §3.5.7).
	ErrBoundaryUnproven = &Error{"runstate: cannot resume an approval checkpoint with output guardrails: the current response boundary cannot be proven; start a new run from safe input",
		"Cannot resume a serialized approval checkpoint with output guardrails because the current response boundary cannot be proven. Start a new run from safe input."}
	// ErrPersistedBeforeGate: second output-guardrail gate error (semantics §3.5.7).
	ErrPersistedBeforeGate = &Error{"runstate: cannot resume an approval checkpoint with output guardrails after items of the current turn were persisted; start a new run from safe input",
		"Cannot resume an approval checkpoint with output guardrails after current-turn items were persisted. Start a new run from safe input."}
)

// Errors of this package alone: calls that would leave a checkpoint Load
// refuses, or a history the Responses API rejects, fail with these before
// anything reaches the Session or the caller's storage.
var (
	// ErrNoStep: a pending write was registered (Save with Register, Park)
	// on a checkpoint whose step cannot carry one. Set the step first.
	ErrNoStep = errors.New("runstate: a pending session write needs a run-again or interruption step")
	// ErrAlreadyAnswered: a save would append an output for a call the
	// session already holds an output for. See AnsweredError.
	ErrAlreadyAnswered = errors.New("runstate: the session already holds an output for the call")
	// ErrNoSession: a held batch claimed with TakeHeld was handed to
	// SaveResumedTurn without a session; the batch stays on the checkpoint.
	ErrNoSession = errors.New("runstate: a claimed held batch needs a session to settle on")
	// ErrInvalidState: MarshalJSON refused a checkpoint that Load would
	// refuse (a field set to a value no document can hold).
	ErrInvalidState = errors.New("runstate: invalid checkpoint state")
)

// AnsweredError is ErrAlreadyAnswered with the calls it names.
type AnsweredError struct {
	SessionID string
	CallIDs   []string // the calls the session already answered
}

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("%v: session %q already answers %s", ErrAlreadyAnswered, e.SessionID, strings.Join(e.CallIDs, ", "))
}

// Unwrap returns ErrAlreadyAnswered.
func (e *AnsweredError) Unwrap() error { return ErrAlreadyAnswered }

// LoadError is the error Load returns: which rule failed, a message, and
// the sentinel it wraps (errors.Is works with the sentinels above).
type LoadError struct {
	Rule string // the rule that failed, e.g. "pending.step" (stable names)
	Msg  string // what was wrong, for humans
	Err  error  // the sentinel: ErrInvalidDocument, ErrInvalidPendingWrite, ErrInvalidTerminalMarker or ErrUnsupportedSchema
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("%v (%s): %s", e.Err, e.Rule, e.Msg)
}

// Unwrap returns the sentinel.
func (e *LoadError) Unwrap() error { return e.Err }

func loadErr(sentinel error, rule rule, format string, args ...any) *LoadError {
	return &LoadError{Rule: string(rule), Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// rule names a load-time validation rule; its value is LoadError.Rule.
type rule string

// The load-time rules. The rulePending* rules are semantics §3.2's
// numbered rules; the others cover the rest of the document.
const (
	ruleDocument              rule = "document"                          // not one JSON object / bad modelled member
	ruleSchema                rule = "schema"                            // unknown, newer, missing or malformed label
	ruleStep                  rule = "current_step"                      // current_step malformed
	rulePersistedItemCount    rule = "current_turn_persisted_item_count" // not a non-negative int
	ruleTerminalMarker        rule = "terminal_unrecoverable"            // not true, or below 1.17
	rulePendingSchema         rule = "pending.schema"                    // §3.2.1 record under a label below 1.17
	rulePendingStep           rule = "pending.step"                      // §3.2.2 step not run-again / interruption
	rulePendingObject         rule = "pending.object"                    // §3.2.3 not an object
	rulePendingKeys           rule = "pending.keys"                      // §3.2.4 exact key set for the label and variant
	rulePendingHeldType       rule = "pending.held_type"                 // §3.2.5 held not a real boolean
	rulePendingHeldBefore     rule = "pending.held_before"               // §3.2.6 held with non-null before
	rulePendingHeldKeyTypes   rule = "pending.held_key_types"            // §3.2.7 response_id/store/policy types
	rulePendingHeldOnly       rule = "pending.held_only"                 // §3.2.8 held keys on an ordinary record
	rulePendingSessionID      rule = "pending.session_id"                // §3.2.9
	rulePendingItems          rule = "pending.items"                     // §3.2.10
	rulePendingBefore         rule = "pending.before"                    // §3.2.11
	rulePendingPersistedCount rule = "pending.persisted_count"           // §3.2.12
	rulePendingVariant        rule = "pending.variant"                   // a variant's own rules (compaction metadata, pending input, current_response)
	ruleRun                   rule = "agentsessions_run"                 // the Run's own member: claims, open turn, response id
)
