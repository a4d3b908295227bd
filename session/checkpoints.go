package session

import (
	"context"
	"errors"
)

// Checkpoint errors, checked with errors.Is.
var (
	// ErrNoCheckpoint reports a checkpoint name the session does not hold.
	ErrNoCheckpoint = errors.New("session: no such checkpoint")
	// ErrCheckpointConflict reports a save or delete whose version is not
	// the stored one: another copy of the checkpoint was saved (or deleted)
	// since this one was loaded. Nothing was written.
	ErrCheckpointConflict = errors.New("session: checkpoint changed since it was loaded")
)

// AnyVersion, passed as the version of SaveCheckpoint or DeleteCheckpoint,
// skips the version check: the call overwrites (or deletes) whatever is
// stored. It is for stores whose callers have no version to give (eino's
// CheckPointStore.Set); a run-state loop always passes the version it
// loaded.
const AnyVersion int64 = -1

// CheckpointStore is implemented by sessions that keep run-state
// checkpoints beside their history: documents (runstate's Python RunState
// JSON, or any bytes) stored under a name, per session, each with a version
// that every save advances. A save or delete names the version it loaded
// (0 for "none stored yet"), so of two copies restored from one checkpoint
// only the first to save succeeds; the other gets ErrCheckpointConflict.
//
// Checkpoints expire with the session's data where the session expires
// (Expirer): a save restarts the clock of the whole session, and a write to
// the session restarts the checkpoints'. Clear keeps a session's
// checkpoints; removing a session from its store removes them.
//
// If a Session does not implement CheckpointStore, a run-state loop keeps
// its checkpoints in a store the caller supplies (runstate.Options.Store).
type CheckpointStore interface {
	Session
	// LoadCheckpoint returns the document stored under name and its
	// version (at least 1); ErrNoCheckpoint when there is none.
	LoadCheckpoint(ctx context.Context, name string) (doc []byte, version int64, err error)
	// SaveCheckpoint stores doc under name if the stored version is
	// version (0: nothing is stored), and returns the new version.
	// Otherwise it returns ErrCheckpointConflict and writes nothing.
	SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error)
	// DeleteCheckpoint removes the checkpoint under name if its stored
	// version is version, and otherwise returns ErrCheckpointConflict.
	// Deleting a checkpoint that is not there succeeds for version 0 and
	// AnyVersion.
	DeleteCheckpoint(ctx context.Context, name string, version int64) error
	// ListCheckpoints returns the names of the session's checkpoints,
	// sorted.
	ListCheckpoints(ctx context.Context) ([]string, error)
}

// CheckpointCommitter is implemented by checkpoint stores that append a
// batch and save a checkpoint in one atomic step (one transaction, one
// script): a reader sees both or neither, and a crash leaves both or
// neither. With it, a run-state loop records a settle's append and the
// checkpoint that says it happened together, and needs no digest recovery.
//
// If a CheckpointStore does not implement CheckpointCommitter, a run-state
// loop saves the checkpoint with its pending write before the append and
// again after it, and recovers a crash in between from the session tail's
// digests.
type CheckpointCommitter interface {
	CheckpointStore
	// AppendWithCheckpoint appends items as one batch (as AddItems) and
	// saves doc under name (as SaveCheckpoint with version), atomically.
	// On ErrCheckpointConflict, or any other error before the commit,
	// nothing is written. An empty batch only saves the checkpoint.
	AppendWithCheckpoint(ctx context.Context, items []Item, name string, doc []byte, version int64) (int64, error)
}
