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
// eino's session event log (adk.SessionEventStore, eino v0.10 on: a Runner
// with a SessionID keeps the conversation as events) is in the nested
// module github.com/agentsessions/sessions/integrations/eino/events,
// pinned to eino's v0.10 alpha line, which does not require this one;
// that Runner takes any CheckPointStore, this Store among them (a program
// that imports both modules builds this package with eino v0.10; its tests
// run on v0.7.36 only).
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
// # At most once: claims
//
// eino resumes an interrupted tool by running it again, so a tool whose
// side effect follows the approval runs twice if two processes resume one
// checkpoint at once, or if a process dies between the side effect and
// the next checkpoint. Claims (Store.Claims) make the side effect happen
// at most once: the tool wraps it in Claims.Run, keyed by the checkpoint
// id (the caller puts it in the run's context with WithCheckPointID: eino
// gives a tool its call id, compose.GetToolCallID, not the checkpoint id)
// and the tool call id:
//
//	ctx = eino.WithCheckPointID(ctx, "order-42")
//	iter, err := runner.ResumeWithParams(ctx, "order-42", &adk.ResumeParams{Targets: map[string]any{interruptID: "approved"}})
//	// in the tool, once approved:
//	return claims.Run(ctx, func(ctx context.Context) (string, error) { return transfer(ctx, args) })
//
// Run saves a claim before fn runs, as a checkpoint of its own in the
// checkpoint id's session (Name()+ClaimPrefix+call id), with version 0, so
// a second claim conflicts (session.ErrCheckpointConflict), and saves fn's
// result over it (the claim's version) when fn returns. Of two resumers,
// one claims and runs fn; the other gets an *InDoubtError (ErrInDoubt and
// session.ErrCheckpointConflict) before its side effect, or the recorded
// result when the first had finished. A resume after a crash inside fn (or
// after fn failed) finds the call in doubt: Run fails with *InDoubtError
// and Claims.InDoubt lists it, until the caller asks the tool's system
// about the call id and resolves it: Resolve (the result found: the next
// resume returns it without running fn), Reclaim (the claim is removed:
// the next resume runs fn again, on purpose) or Abandon (a message for the
// model as the result). A resume after the result was recorded returns it
// without running fn. What holds: a claimed side effect runs at most once
// (in doubt after a crash inside it); one not under a claim runs at least
// once. Claims.Clear deletes a finished run's claims (Store.Delete leaves
// them).
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
