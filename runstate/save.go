package runstate

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// SaveArgs are the arguments of one Save (Python's save_result_to_session).
type SaveArgs struct {
	// Input is the input slot: the caller's input items, or a held batch
	// that is settling through this save (SettlingHeld). It is saved ahead
	// of NewItems, as is.
	Input []session.Item
	// NewItems are the turn's items, in input-item form, before conversion.
	NewItems []session.Item
	// Policy converts NewItems (forced to nil for a Conversations-like
	// session).
	Policy *Policy
	// ResponseID is the response the save belongs to; empty skips the
	// compaction bookkeeping.
	ResponseID string
	// Store is the store setting of that response.
	Store *bool
	// Slice skips the first cp.PersistedCount NewItems (re-adding tool
	// outputs among them) and advances cp.PersistedCount by the count
	// (Python passes run_state).
	Slice bool
	// Register registers the batch as the ordinary pending write and settles
	// it immediately, so a crash or failure mid-append leaves a record
	// Resume recovers (Python passes resumed_write_state).
	Register bool
	// SettlingHeld says Input is a held batch settling here: its items count
	// toward the reported count and its outputs toward the compaction
	// deferral.
	SettlingHeld bool
}

// CompactionKind says what a save's compaction bookkeeping did.
type CompactionKind string

// The compaction outcomes.
const (
	CompactionNone     CompactionKind = ""         // no response id, or not compaction-aware
	CompactionDeferred CompactionKind = "deferred" // DeferCompaction called (or skipped when the session cannot defer)
	CompactionRan      CompactionKind = "ran"      // RunCompaction called
)

// Compaction is the compaction bookkeeping one save did (spec §2.5).
type Compaction struct {
	Kind       CompactionKind
	ResponseID string
	Store      *bool
	Force      bool // RunCompaction was forced by a pending deferral
}

// SaveResult is what one save did.
type SaveResult struct {
	// Count is the number of items the append wrote out of NewItems, plus,
	// when SettlingHeld, out of Input (after dedup).
	Count int
	// Appended is the batch handed to the session (nil when nothing was
	// appended).
	Appended []session.Item
	// Compaction is the compaction bookkeeping done after the save.
	Compaction Compaction
}

// Save persists a turn to s (Python's save_result_to_session): it
// converts NewItems, deduplicates Input+NewItems preferring the latest,
// sanitises for a Conversations-like session, appends the batch (as a
// registered pending write with Register), advances cp.PersistedCount with
// Slice, and runs the compaction bookkeeping. With s nil it does nothing.
func (cp *Checkpoint) Save(ctx context.Context, s session.Session, args SaveArgs) (SaveResult, error) {
	panic("todo")
}

// ResumedTurn are the arguments of SaveResumedTurn.
type ResumedTurn struct {
	// Items are the resolved turn's items, in input-item form.
	Items []session.Item
	// Held is a held batch claimed with TakeHeld, to land ahead of Items in
	// the same append.
	Held []session.Item
	// Policy, ResponseID and Store are the resume's (not the parked
	// response's): exits compact for the resume's response.
	Policy     *Policy
	ResponseID string
	Store      *bool
}

// SaveResumedTurn persists a resumed turn's items with the held batch
// ahead of them in one ordered append (Python's save_resumed_turn_items):
// a held batch the items already cover is dropped as redundant, otherwise
// the pairing guard keeps only settle-safe held items (calls still pending
// approval on cp.Step settle unpaired); the save registers the ordinary
// pending write when the step is run-again or interruption or a held batch
// is settling. It sets and returns cp.PersistedCount: the previous count
// plus the count the append reports.
func (cp *Checkpoint) SaveResumedTurn(ctx context.Context, s session.Session, turn ResumedTurn) (int, SaveResult, error) {
	panic("todo")
}
