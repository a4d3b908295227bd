// Package linearize checks that a session behaves as one linearizable list
// of items under concurrent clients, with the porcupine checker
// (github.com/anishathalye/porcupine).
//
// Model is the sequential specification: a session is a list of items, and
// the operations are AddItems(batch), Items, Latest(n), PopItem and Clear
// (session.Append, All, Latest, Pop and Clear), Follow, AppendOnce,
// Commit, LoadCheckpoint, SaveCheckpoint and DeleteCheckpoint.
//
// Follow is session.ReadSince from the cursor the client's last Follow
// returned. Its Input says what that cursor stands for: how many items
// that Follow saw in all, and the last of them; the model answers the
// items after them, or session.ErrCursorLost exactly when that item is no
// longer there (a pop of it or below it, a clear), as docs/semantics.md
// states it; the zero cursor is never lost. AppendOnce is
// session.AppendOnce: the model's state also holds the operation ids
// carried out, which Clear and PopItem keep; a call with one of them
// appends nothing and reports false. Operation n always carries the batch
// OnceBatch(n), so that the clients of Record, in one process or several,
// retry each other's operations, concurrently too. Record runs AppendOnce
// only on a session.OnceAppender; Follow runs on every session
// (ReadSince's fallback where it is not a session.Follower).
//
// Commit is session.CheckpointCommitter's AppendWithCheckpoint of a batch
// and a document under one checkpoint name (CheckpointName), at the
// version the client saw last; LoadCheckpoint, SaveCheckpoint and
// DeleteCheckpoint are session.CheckpointStore's, on that name. The
// model's state also holds the checkpoint's version (0: none) and
// document, which Clear and PopItem keep: a commit or save at the stored
// version (a save also at session.AnyVersion) saves its document at that
// version plus one, a commit appending its batch too; a delete at the
// stored version or AnyVersion removes the checkpoint (a delete of none
// succeeds at 0 and AnyVersion); any other reports
// session.ErrCheckpointConflict and writes nothing. A failed one may have
// taken effect, but only where its version check passes. The first
// creation is at version 1; one after a delete may be at any version of at
// least 1 (the SQL, memory and Redis stores start again at 1, Mongo's
// continues past its tombstone), unknown to the model until an output
// shows it if the creation failed. Record runs Commit only on a
// session.CheckpointCommitter and the others only on a
// session.CheckpointStore, each client through a handle of its own
// (Config.Handles); commits come in runs, as a run-state loop's do, and a
// client whose write conflicted loads the checkpoint and writes again.
//
// Record runs concurrent
// clients against a real session and records what each call saw, with
// call and return times from the system-wide monotonic clock, so that
// histories recorded by several processes on one machine can be merged.
// Check decides whether a history is linearizable; for one that is not,
// Minimize shrinks it to a smaller history that is still not linearizable
// and Explain and Visualize show it.
//
// Every item a history writes is unique (its client and sequence number
// are its content; an AppendOnce batch's are its operation's, which lands
// once), so the checker never has to guess which write a read saw. A write that returned an error may or may not have happened: it is
// recorded with an unknown output and a return time of infinity, so the
// checker may place it anywhere after its call, including after every
// other operation (not happened). A read that failed is left out: it
// changed nothing and showed nothing.
//
// A list cannot be partitioned, and checking is NP-hard in the number of
// concurrent operations, so a campaign checks many short histories (a few
// hundred operations each), each on a fresh session.
//
// The package is a nested module, so that porcupine never enters the
// library's go.mod. Its tests run the campaign against every backend
// (see linearize_test.go and docs/reliability.md).
package linearize
