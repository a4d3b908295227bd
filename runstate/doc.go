// Package runstate is the part of an agent runner's checkpoint (the Python
// SDK's RunState) that owns Session persistence: the current step, the
// number of the current turn's items already persisted, the terminal
// marker, and the one pending Session write.
//
// # The checkpoint
//
// A Checkpoint is loaded from a whole Python RunState JSON document with
// Load and written back with MarshalJSON. Only the members this package
// models are rewritten; every other member of the document (agents,
// approvals, usage, trace, ...) is kept byte for byte in meaning and
// written back unchanged, in Python's json.dumps(indent=2, sort_keys=True)
// layout, so a Python-written checkpoint round-trips byte-identically.
// Loading enforces every validation rule of the Python loader for the
// pending write (semantics §3.2) through a per-label, per-variant key table
// (Variants); each refusal is a *LoadError naming the rule that failed.
//
// # The ordinary pending write
//
// A resumed turn's save registers its batch on the checkpoint before the
// append (Save with Register, SaveResumedTurn), records digests of the
// session tail just before appending (Before), and clears the record once
// the append succeeded. If the process dies or the append fails, the record
// rides the checkpoint; Resume, called at resume entry before any model call
// or tool re-execution, decides from the session tail whether the append
// committed (accept the lost acknowledgement) or not (append now), and
// refuses with ErrCannotReconcile when the tail proves neither. The slot
// holds one record: a second batch while one stands is ErrSlotOccupied.
//
// # The held write
//
// When an interrupted turn's items are withheld from the Session because
// output guardrails have not yet approved the response (ShouldDefer), Park
// registers them as a held record: it touches only the checkpoint. The
// held batch then either
//
//   - settles at resume entry (Resume) when the checkpoint is a run-again
//     step and a session is attached;
//   - grows with a detached resume's resolved items (ExtendHeld) or with a
//     re-park (Park again), always as one canonical batch;
//   - settles at a gate-legal exit of a later resume: TakeHeld claims it and
//     SaveResumedTurn lands it ahead of the resolved turn's items in one
//     ordered append, registered as the ordinary pending write so a crash
//     mid-settle is recovered;
//   - or is discarded (DiscardHeld) when an output guardrail trips, when a
//     detached run completes, or when a max-turns handler ends the run, each
//     only once that exit succeeded (DiscardHeldAfter).
//
// Held calls settle only when paired with their outputs (safeToSettle),
// except calls whose approvals are still pending.
//
// A checkpoint whose run ended mid-settle of a final output carries a
// record with a final-output step; such a document is refused on load on
// purpose (fail closed), because replaying it could repeat an approved side
// effect.
//
// All Session access goes through the session package's fallbacks, so a
// session without LatestReader is read fully and cut locally, and a
// RunContextAware session receives the run context on every call.
//
// # Driving it from an agent loop
//
// Items are Responses input items (session.Item); converting them means
// applying the reasoning-id Policy and, for a Conversations-like session
// (session.IDInsensitive), Sanitize. A loop calls, in order:
//
//	cp, err := runstate.Load(doc)          // or runstate.New()
//	_, err = cp.Resume(ctx, s)             // before any model call or tool re-execution
//	err = cp.CheckOutputGuardrailGate(g)   // when resuming an interruption with output guardrails
//	cp.StartTurn()                         // at each new turn
//	cp.Save(ctx, s, SaveArgs{...})         // each completed turn (Slice: true)
//	cp.Park(s, withheld, ParkOptions{...}) // an approval interruption under the gate
//	cp.ExtendHeld(resolved)                // a detached resume's resolved items
//	cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: resolved, Held: cp.TakeHeld(), ...})
//	cp.DiscardHeldAfter(ctx, reason, exit) // completions that end the run
//	doc, err = cp.MarshalJSON()
//
// Items that rode a checkpoint come back with sorted keys (the document is
// written in Python's sort_keys layout); digests, and therefore recovery,
// do not depend on key order.
package runstate
