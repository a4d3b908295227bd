// Package runstate makes an agent loop's Session persistence crash-safe,
// including the held write that keeps a human approval from ever
// corrupting the history.
//
// # The front door: Run
//
// A loop author needs one type. Open a Run on the conversation's session
// (any adapter; the checkpoint is kept beside the session, in the same
// store), before any model call or tool: Open recovers whatever an earlier
// process left half done. Then, per response of the model:
//
//	run, err := runstate.Open(ctx, s, runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool})
//	err = run.Input(ctx, userMessage)                     // the run's input, first
//	err = run.Turn(ctx, respID, items...)                 // a turn that goes on to another model call
//	err = run.Interrupt(ctx, respID, items, "call_1")     // a turn awaiting approval: the process may exit
//	// later, in any process:
//	run, err = runstate.Open(ctx, s, opts)
//	for _, id := range run.Awaiting() {                   // once the human approved:
//		err = run.Claim(ctx, id)                          // before the tool runs; the loser of two gets session.ErrCheckpointConflict
//		err = run.Output(ctx, runTool(id))                // as each tool output exists
//	}
//	err = run.Settle(ctx)                                 // calls and outputs land in one ordered append
//	err = run.Finish(ctx, respID, final...)               // the run is over: the checkpoint is idle again
//
// Run.Next says what the loop must do next: give input, call the model
// (after which response), await approval, record the outputs of running
// tools, resolve calls in doubt, settle, or nothing. Open reads before it
// writes: on a run with no checkpoint it stores nothing.
//
// What holds. The history is exactly once: every call that appends is
// crash-safe (killed at any instant, the next Open lands each batch exactly
// once and never records a second output for a call); no output is ever
// stored without its call (Interrupt refuses an awaited id that names no
// call, with an *UnknownCallError, writing nothing); two processes resuming
// one checkpoint cannot both write: the checkpoint is versioned, and the
// second gets session.ErrCheckpointConflict, in whichever call. A tool's
// side effects are the caller's, and hold as follows:
//
//   - a claimed tool (Claim before it runs) runs at most once: a crash
//     inside it leaves the call in doubt (InDoubt, Next), never offered as
//     awaiting again, until the caller resolves it with Output (what the
//     tool's system reports under the call id, its natural idempotency
//     key), Reclaim (run it again, on purpose) or Abandon (tell the model
//     the outcome is unknown), once its claimer is known to be gone (a
//     checkpoint cannot tell a dead claimer from a slow one: Claims says
//     who claimed when);
//   - a tool run without a claim runs at least once: a crash after its side
//     effect and before its Output is durable offers the call again.
//
// Where the session commits an append with its checkpoint
// (session.CheckpointCommitter), both are one atomic step and no digests
// are read; elsewhere the Python SDK's digest recovery decides. ExampleRun
// is the whole approval flow across two processes.
//
// The rest of this package is the checkpoint the Run drives, for loops
// shaped like the Python runner (handoff filters, detached exits,
// compaction, max-turns handlers): Checkpoint and its methods, which keep
// every check the Run relies on.
//
// # The checkpoint
//
// A Checkpoint is loaded from a whole Python RunState JSON document with
// Load and written back with MarshalJSON. Only the members this package
// models are rewritten; every other member of the document (agents,
// approvals, usage, trace, ...) is kept and written back unchanged, in
// Python's json.dumps(indent=2, sort_keys=True) layout, so a
// Python-written checkpoint round-trips byte-identically. Loading enforces
// every validation rule of the Python loader for the pending write
// (semantics §3.2) through a per-label, per-variant key table; each
// refusal is a *LoadError naming the rule that failed. What MarshalJSON
// writes, Load accepts and writes back byte for byte: a state no document
// can hold is refused at the call that would make it (ErrNoStep) or by
// MarshalJSON (ErrInvalidState), and a record under a step that cannot
// resume (a final output's, mid-settle) is written terminal, so Load reads
// it back and Resume refuses it.
//
// What a Run keeps that the Python RunState has no member for (claims,
// whether an interrupted turn awaits its settle, the last response id) rides
// in one member of its own, agentsessions_run, which Load checks as strictly
// as the rest. The Python SDK has no such member and does not read it: a
// Python process resuming a Go run's checkpoint does not see its claims.
//
// # Labels
//
// MarshalJSON writes the lowest $schemaVersion that can carry what the
// document holds, and never a label older than the one it was loaded with
// (Checkpoint.Schema; 1.17 for New):
//
//   - no record and no terminal marker: the loaded label, unchanged (a
//     1.15 document written back is 1.15, byte for byte);
//   - an ordinary pending write or the terminal marker: at least 1.17, the
//     label under which the held-write pull request's line (PR #4828)
//     carries the four-key record;
//   - a held record: at least 1.18, that line's label for it;
//   - a record of a later variant (main-line compaction metadata, pending
//     input, 1.19's current_response) keeps the label it was loaded under;
//     a 1.19 document stays 1.19.
//
// Which Python SDK reads which output (semantics §3.1). The Python SDK's
// main line, checked on 2026-12-03, writes 1.17 and its loader accepts
// labels up to 1.17, where 1.17 means Docker container labels and no
// pending write exists:
//
//   - a document labelled 1.17 or older without a record or marker: its
//     label is one that SDK accepts; this package changes nothing else in
//     it;
//   - 1.17 with a four-key pending write or the terminal marker: read as
//     such by the PR #4828 line, whose 1.17 is exactly that record. The
//     main line accepts the label but has no pending_session_write, so
//     what it does with the member is not established;
//   - 1.18 with a held record: only the PR #4828 line (its reviewed head);
//     no release carries it;
//   - 1.18 and 1.19 documents loaded as such (held, compaction metadata,
//     pending input, current_response) are written back under their own
//     label: only the writers of those shapes read them, and a loader that
//     stops at 1.17 refuses them, as it refused the originals.
//
// # The ordinary pending write
//
// A resumed turn's save registers its batch on the checkpoint before the
// append (Save with Register, SaveResumedTurn), records digests of the
// session tail just before appending, and clears the record once the
// append succeeded. If the process dies or the append fails, the record
// rides the checkpoint; Resume, called at resume entry before any model
// call or tool re-execution, decides from the session tail whether the
// append committed (accept the lost acknowledgement) or not (append now),
// and refuses with ErrCannotReconcile when the tail proves neither. The
// slot holds one record: a second batch while one stands is
// ErrSlotOccupied.
//
// # The held write
//
// When an interrupted turn's items are withheld from the Session because
// output guardrails have not yet approved the response (ShouldDefer), Park
// registers them as a held record: it touches only the checkpoint. The
// held batch grows with the resumed turn's outputs as they commit
// (ExtendHeld) or with a re-park (Park again), always as one canonical
// batch, and leaves the checkpoint through exactly one exit:
//
//   - a gate-legal exit with a session attached: TakeHeld claims it and
//     SaveResumedTurn lands it ahead of the resolved turn's items in one
//     ordered append, registered as the ordinary pending write so a crash
//     mid-settle is recovered;
//   - an exit without a session: HoldResumedTurn folds the resolved turn
//     into the batch, which rides the checkpoint; the reattach (a run-again
//     resume with the session) settles it at entry (Resume);
//   - an output-guardrail tripwire: DiscardHeld, before the sanitised
//     rebuild is saved;
//   - a detached run's final output, or a max-turns handler's output:
//     DiscardHeldAfter, which discards only once that exit succeeded.
//
// At both resumed-turn exits a handoff filter's view of the resolved items
// (when not empty) withdraws the outputs folded this turn that it no longer
// carries; the settle's pairing guard then drops each such call (a
// detached exit's held record keeps it until the entry settle, as Python's
// does): what the filter removed never reaches the Session, attached or
// detached, live or through a stored checkpoint.
// Held calls settle only when paired with their outputs, except calls
// whose approvals are still pending. Example_heldWriteExits walks every
// exit.
//
// A checkpoint whose run ended mid-settle of a final output carries a
// record with a final-output step; such a document is refused on load on
// purpose (fail closed), because replaying it could repeat an approved side
// effect.
//
// All Session access goes through the session package's fallbacks, so a
// session without LatestReader is read fully and cut locally, and a
// RunContextAware session receives the run context on every call. A
// Conversations-like session (session.IDInsensitive) has its items
// sanitised and converted without a reasoning-id Policy, as Python does.
//
// # Driving it from an agent loop
//
// Items are Responses input items (session.Item). A loop calls, in order:
//
//	cp, err := runstate.Load(doc)          // or runstate.New()
//	_, err = cp.Resume(ctx, s)             // before any model call or tool re-execution
//	err = cp.CheckOutputGuardrailGate(g)   // when resuming an interruption with output guardrails
//	cp.StartTurn()                         // at each new turn
//	cp.Save(ctx, s, SaveArgs{...})         // each completed turn (Slice: true)
//	cp.Park(s, withheld, ParkOptions{...}) // an approval interruption under the gate
//	cp.ExtendHeld(outputs)                 // each tool output of a resumed turn, as it commits
//	cp.SetStep(StepRunAgain)               // the approvals resolved
//	cp.SaveResumedTurn(ctx, s, ResumedTurn{Items: view, Held: cp.TakeHeld(), ...}) // exit, attached
//	cp.HoldResumedTurn(view)               // exit, detached
//	cp.DiscardHeld()                       // an output-guardrail tripwire
//	cp.DiscardHeldAfter(ctx, exit)         // completions that end the run
//	doc, err = cp.MarshalJSON()
//
// Items that rode a checkpoint come back with sorted keys (the document is
// written in Python's sort_keys layout); digests, and therefore recovery,
// do not depend on key order.
package runstate
