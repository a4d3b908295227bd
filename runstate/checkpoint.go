package runstate

import (
	"encoding/json"

	"github.com/agentsessions/sessions/session"
)

// StepKind is the kind of a checkpoint's current step.
type StepKind string

// The step kinds. A handoff is normalised to StepRunAgain (the target agent
// is committed by then; spec §3.3), so it never appears as a kind.
const (
	// StepNone is a checkpoint without a resumable step (JSON null).
	StepNone StepKind = ""
	// StepInterruption waits for tool approvals.
	StepInterruption StepKind = "next_step_interruption"
	// StepRunAgain continues with another model call.
	StepRunAgain StepKind = "next_step_run_again"
	// StepFinalOutput ended the run. Python never serialises it: it is
	// written as null, like StepNone.
	StepFinalOutput StepKind = "next_step_final_output"
)

// stepHandoff is the Python type of a handoff step, read as StepRunAgain.
const stepHandoff = "next_step_handoff"

// Step is a checkpoint's current step.
type Step struct {
	// Kind is the step's kind.
	Kind StepKind
	// PendingCallIDs are the call ids (or MCP request ids) still awaiting
	// approval on an interruption step. Load fills them from the
	// interruptions' raw items; the pairing guard lets these calls settle
	// without outputs.
	PendingCallIDs []string
	// Raw is the step's JSON object, written back unchanged while its
	// "type" matches Kind (an interruption's data rides here). Nil writes
	// {"type": Kind}.
	Raw json.RawMessage
}

// NewStep returns a step of kind k, mapping Python's handoff type to
// StepRunAgain.
func NewStep(k StepKind) Step {
	if k == stepHandoff {
		k = StepRunAgain
	}
	return Step{Kind: k}
}

// Checkpoint is the persistence part of an agent run's checkpoint, plus
// every other member of the Python RunState document it was loaded from.
//
// A Checkpoint is not safe for concurrent use; the in-progress guard only
// catches re-entrant settles of the same value, and independently loaded
// copies are not interlocked (spec §3.4: the application serialises access
// to a Session).
type Checkpoint struct {
	// Schema is the label the document was loaded with, or CurrentSchema
	// for New. MarshalJSON writes the newer of Schema and CurrentSchema.
	Schema string
	// Step is the current step.
	Step Step
	// PersistedCount is how many of the current turn's items already
	// reached the Session (current_turn_persisted_item_count).
	PersistedCount int
	// Pending is the pending Session write, or nil.
	Pending *PendingWrite
	// Terminal marks a run that must never be resumed
	// (terminal_unrecoverable).
	Terminal bool

	members    []Member                 // the whole document, in order
	inProgress bool                     // live guard, never serialised
	folded     map[session.PairKey]bool // call keys folded into the held batch this turn
}

// New returns an empty checkpoint labelled CurrentSchema.
func New() *Checkpoint { panic("todo") }

// Load reads a whole RunState JSON document. Every refusal is a *LoadError
// wrapping ErrInvalidDocument, ErrInvalidPendingWrite,
// ErrInvalidTerminalMarker or ErrUnsupportedSchema.
func Load(data []byte) (*Checkpoint, error) { panic("todo") }

// UnmarshalJSON is Load into cp.
func (cp *Checkpoint) UnmarshalJSON(data []byte) error { panic("todo") }

// MarshalJSON writes the document: every member it was loaded with, the
// modelled ones rewritten, in Python's json.dumps(indent=2, sort_keys=True)
// layout with a trailing newline. The label written is the newer of Schema
// and CurrentSchema, so older documents are upgraded and a newer one is
// never mislabelled; writing is idempotent.
func (cp *Checkpoint) MarshalJSON() ([]byte, error) { panic("todo") }

// Clone returns a deep copy of cp with the in-progress guard reset (the
// copy a result carries).
func (cp *Checkpoint) Clone() *Checkpoint { panic("todo") }

// Field returns the raw value of a top-level member of the document.
func (cp *Checkpoint) Field(key string) (json.RawMessage, bool) { panic("todo") }

// SetField sets a top-level member the package does not model. Modelled
// members ($schemaVersion, current_step, current_turn_persisted_item_count,
// pending_session_write, terminal_unrecoverable) are refused.
func (cp *Checkpoint) SetField(key string, value json.RawMessage) error { panic("todo") }

// SetStep sets the current step to kind k (a handoff becomes run-again)
// and clears its raw form and pending ids.
func (cp *Checkpoint) SetStep(k StepKind) { panic("todo") }

// StartTurn begins a new turn: the persisted count goes back to 0 and the
// record of calls folded into the held batch this turn is forgotten.
func (cp *Checkpoint) StartTurn() { panic("todo") }

// InProgress reports whether a settle of this checkpoint's record is
// running.
func (cp *Checkpoint) InProgress() bool { return cp.inProgress }

// CheckResumable returns ErrTerminal for a terminal checkpoint. Resume
// calls it first, before any Session access.
func (cp *Checkpoint) CheckResumable() error { panic("todo") }
