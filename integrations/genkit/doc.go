// Package genkit keeps Firebase Genkit's agent sessions in a session store:
// Store is genkit's exp.SessionStore (GetSnapshot, GetLatestSnapshot,
// SaveSnapshot) and its optional exp.SnapshotSubscriber (so agents over it
// can detach and be aborted), over the checkpoints the store's sessions
// keep beside their history (session.CheckpointStore), on any backend that
// has them: memory, SQLite, PostgreSQL, Redis, MongoDB. It is a module of
// its own, so that the library's users who do not use genkit never
// download it. Its package name is genkit, as genkit's own root package
// is; import it under another name (genkitstore below).
//
//	st, err := adapters.Open(ctx, "postgres://agent@db/sessions")
//	store, err := genkitstore.New[MyState](st, genkitstore.Options{})
//	g := genkit.Init(ctx, genkit.WithPlugins(...), genkit.WithExperimental())
//	agent := genkitx.DefineAgent(g, "banker", aix.InlinePrompt{...}, aix.WithSessionStore[MyState](store))
//	out, err := agent.RunText(ctx, "send 120 to bob", aix.WithSessionID[MyState]("order-42"))
//	// ... the process may exit; later, in any process over the same database:
//	conn, err := agent.Connect(ctx, aix.WithSessionID[MyState]("order-42"))
//
// # Where a snapshot lives
//
// genkit names a snapshot by its own id (a UUID the runtime reserves per
// turn) and reads it back by that id alone, so each snapshot is one
// checkpoint, named SnapshotName, in a session of its own:
// Options.SnapshotPrefix + snapshot id ("genkit-snapshot:<id>" by
// default). The document is genkit's JSON of the exp.SessionSnapshot, as
// given. Each genkit session (conversation) has an index, a checkpoint
// named IndexName in the session Options.SessionPrefix + session id (the
// session of the same id by default, beside its history), listing its
// snapshots' ids and CreatedAt; GetLatestSnapshot reads the index and
// then the newest row. Both documents are checkpoints of the library's
// sessions, so they expire with their sessions where the backend expires
// data, and are encrypted where the sessions are (NewFunc over
// encrypted.New).
//
// Where sessions expire (a ttl= option), each document expires with its own
// session, and every save restarts its clock: a conversation's index is
// written with each new snapshot, and its rows as they are saved, so the
// newest row outlives the older ones; once the index has expired,
// GetLatestSnapshot finds nothing and the session id starts a new
// conversation.
//
// Nothing is ever deleted: genkit's interface has no delete, and genkit's
// in-memory store keeps every snapshot too. The index grows by one short
// entry (about 90 bytes) per snapshot, and every save reads it, so a
// conversation of thousands of turns reads a few hundred kilobytes per
// turn; expire or remove old sessions where that matters.
//
// # Compare-and-set
//
// SaveSnapshot is genkit's atomic read-modify-write: it loads the row and
// its checkpoint version, applies the caller's function, and saves with
// that version (session.CheckpointStore.SaveCheckpoint), which the backend
// refuses if any writer, in any process, saved the row since. On such a
// refusal it loads the new row and applies the function again (genkit
// requires the function to be pure for exactly this), up to
// Options.Attempts times; so of two writers that both flip a pending
// snapshot only if it is still pending (an abort racing the run's
// finalize), exactly one writes, and the other's function sees the
// winner's row. When the attempts run out, or with Attempts: 1 on the
// first refusal, SaveSnapshot fails with an error matching
// ErrSnapshotConflict, genkit's status.ErrAborted and
// session.ErrCheckpointConflict, and writes nothing. (genkit v1.12 has no
// conflict error of its own: its stores are single-process.)
//
// A save first makes sure the index lists the row (a write only for a new
// row), then writes the row, so a reader never finds a saved row the index
// misses; a save that fails in between leaves an index entry without a
// row, which GetLatestSnapshot passes over.
//
// # Corrupt documents
//
// A row or index that is not what the Store writes is an error matching
// ErrCorruptSnapshot (genkit's status.ErrDataLoss); the document stays as
// it is, the message never quotes it, and other snapshots stay readable.
// A corrupt newest row fails GetLatestSnapshot rather than resuming the
// conversation from an older snapshot.
//
// # Tested with
//
// github.com/firebase/genkit/go v1.12.0 on Go 1.26: a prompt agent
// (genkit's DefineAgent, with a fake model registered in genkit) whose
// interruptible tool asks for approval, the approval sent in a new genkit
// instance over a reopened store, and further turns after another restart,
// on memory, SQLite, PostgreSQL, Redis, Redis Cluster and MongoDB: every
// model request and the final session state equal what genkit's
// localstore.InMemorySessionStore gives, and the tool runs once; a
// detached turn aborted from another process (another genkit instance and
// client) stops and settles as aborted, as it does within one process on
// genkit's in-memory store. The store's contract is checked against
// genkit's in-memory store on the same operations, and two writers over
// independent clients race on one row.
package genkit
