// Package eino keeps CloudWeGo eino's checkpoints in a session store: Store
// is eino's CheckPointStore (Get, Set) and its optional CheckPointDeleter
// (Delete), over the checkpoints the store's sessions keep beside their
// history (session.CheckpointStore), on any backend that has them. It is a
// module of its own, so that the library's users who do not use eino never
// download it.
//
//	st, err := adapters.Open(ctx, "sqlite:///var/lib/agent/sessions.db")
//	cps, err := eino.New(st, eino.WithPrefix("eino:"))
//	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: cps})
//	iter := runner.Query(ctx, "send 100 EUR to bob", adk.WithCheckPointID("order-42"))
//	// ... the tool interrupts for approval; the process may exit. Later, in any process:
//	iter, err = runner.ResumeWithParams(ctx, "order-42", &adk.ResumeParams{Targets: map[string]any{interruptID: "approved"}})
//	// ... drained without a new interrupt: the checkpoint is consumed.
//	err = cps.Delete(ctx, "order-42")
//
// The same Store serves compose graphs (compose.WithCheckPointStore).
//
// # Where a checkpoint lives
//
// Each eino checkpoint id maps to one session: the session id is the
// checkpoint id itself by default, prefix+id with WithPrefix, or any
// mapping with WithSessionID. In that session the document is stored under
// the checkpoint name "eino" (DefaultName; WithName changes it), so it sits
// beside the session's history and beside other checkpoints (runstate's)
// without touching them: mapping a checkpoint id to the conversation's own
// session keeps the two together, and removing the session from its store
// removes both. The document is eino's own bytes (gob), stored as given.
//
// New takes an adapters.Store and fails with an error wrapping
// ErrNoCheckpoints when the store does not declare the checkpoints
// capability. NewFunc takes any func(id) (session.Session, error), for
// wrapped sessions (encrypted, otelsession: a wrapper keeps the checkpoint
// methods of the session it wraps; encrypted stores the document as an
// encrypted envelope); a session without the capability fails the call with
// ErrNoCheckpoints.
//
// # Versions, expiry and deletion
//
// eino has no versions: Set saves with session.AnyVersion and overwrites
// whatever is stored. Get returns (nil, false, nil) for a checkpoint that
// is not there (session.ErrNoCheckpoint). Where the backend expires data
// (memory, Redis, MongoDB with ttl= in the store's URL), the checkpoint
// expires with its session, and every Set restarts the session's clock.
//
// eino's Runner (v0.7.36) never deletes a checkpoint: a consumed one stays
// behind forever unless someone deletes it (cloudwego/eino#870; PR #1102
// deletes TurnLoop's from v0.9 on, through CheckPointDeleter). Two ways:
//
//   - Delete once the resumed run has finished without a new interrupt (the
//     safe one: until then a crash can resume again). Store implements
//     eino's CheckPointDeleter, so eino versions that call it (TurnLoop,
//     v0.9) delete through it.
//   - DeleteOnGet: Get deletes what it returns, the version it read only
//     (a newer checkpoint saved meanwhile survives). Nothing to call, but a
//     crash during the resumed run loses the interrupt.
//
// # Tested with
//
// eino v0.7.36 (the version that resolves by default) with
// github.com/bytedance/sonic v1.15.5 (pinned in go.mod: eino v0.7.36 asks
// for sonic v1.14.1, which does not build on Go 1.26), on Go 1.26: an ADK
// ChatModelAgent whose tool interrupts for approval, interrupted, resumed
// with "later" (interrupting again) and approved, a new Runner over a
// reopened store between runs, with Generate and with streaming, on
// memory, SQLite, Redis, Redis Cluster, MongoDB and PostgreSQL, plain and
// encrypted: the model's input on every call is byte for byte what eino's
// in-memory store gives, the tool runs once, and no checkpoint is left
// behind. eino v0.9's CheckPointDeleter is matched by its documented
// signature only; that version is not served to this module's build.
package eino
