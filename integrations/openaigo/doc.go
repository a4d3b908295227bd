// Package openaigo keeps the history of an agent built on the official Go
// client, github.com/openai/openai-go/v3 (package responses), in any
// session.Session: every adapter of github.com/agentsessions/sessions and
// the encrypted and otelsession wrappers. It is a module of its own, so
// that the library's go.mod never requires openai-go.
//
// # The history
//
// A History appends what the caller sends and what the API answers, as
// their JSON bytes, and builds the next request's input from
// history.ModelInput, which never sends an output whose call fell out of
// the window:
//
//	h := openaigo.New(s, openaigo.Options{Window: 50}) // 0: every item
//	err := h.AddJSON(ctx, json.RawMessage(`{"role":"user","content":"Weather in Paris?"}`))
//	params, err := h.Params(ctx, responses.ResponseNewParams{Model: "gpt-5"})
//	resp, err := client.Responses.New(ctx, params)
//	err = h.AddResponse(ctx, resp)                      // resp.Output[i].RawJSON(), byte for byte
//	err = h.AddInput(ctx, toolOutputs...)               // []responses.ResponseInputItemUnionParam
//
// Input items go to openai-go as param.Override of their stored bytes
// (InputParam); openai-go's encoder compacts insignificant white space and
// changes nothing else, so an item the API sent goes back byte for byte.
//
// # Why not the typed path
//
// The typed path (json.Unmarshal of a stored item into
// responses.ResponseInputItemUnionParam, then openai-go's encoding) is not
// used, in either direction, because it does not keep items. Measured over
// the 66 item fixtures of testdata/items.jsonl (every type of history's
// pairing table, all 28 output item types openai-go v3.102.0 decodes, and
// the shapes below; TestTypedPathLosses):
//
//   - 8 fail to load: every input message written without "type", the
//     SDK's own {"content":"hi","role":"user"} first ("apijson: was not able
//     to find discriminated union variant");
//   - 21 are sent with members lost or changed: an explicit null dropped
//     (9), an assistant message's id and status (5, and the API then cannot
//     pair the message with its reasoning item), created_by (5), members
//     openai-go does not know (2), a local_shell_call_output's call_id
//     turned into an empty id, 12345678901234567890 sent as
//     12345678901234567000 and 0.1000000000000000055511151231257827 as 0.1;
//   - 36 are sent with the same members in another order;
//   - 1 is sent unchanged.
//
// The raw path sends 65 of the 66 byte for byte and the 66th (written with
// spaces) compacted, and every adapter keeps all 66 byte for byte
// (TestFixtureRoundTrip, TestFixtureWire).
//
// # A history the Conversations API keeps
//
// ConversationsSession is a session.Session kept by the OpenAI
// Conversations API, as the Python SDK's OpenAIConversationsSession: the
// session id is the conversation id (created on first use, reported to
// OnNewConversation), items are sanitised as Python's runner sends them,
// and the API gives each item an id of its own, so the session reports
// IgnoreIDsForMatching and runstate matches it without ids. Its pop and
// its batches of more than 20 items are not atomic, and a write whose
// reply was lost is session.ErrOutcomeUnknown: its doc has the conformance
// grade. A runstate.Run on it keeps its checkpoint in
// runstate.Options.Store:
//
//	s := openaigo.NewConversationsSession(&client, openaigo.ConversationsOptions{ConversationID: saved})
//	run, err := runstate.Open(ctx, s, runstate.Options{Store: checkpoints, OutputGuardrails: true})
//
// # Approvals
//
// The approval flow is runstate.Run's, driven with openai-go's types
// (Turn, Interrupt, AwaitingCalls, Claim, RunTool, Output, InDoubtCalls,
// Finish, RunInput): a response whose calls need a human parks on the
// run's checkpoint, kept in the session's own store
// (session.CheckpointStore); under output guardrails the response's items
// ride the checkpoint, not the session, until the approvals come back.
// Once a call is approved, its tool runs under a claim: RunTool saves the
// claim (one versioned write of the checkpoint) before the tool's side
// effect and records the tool's output after it:
//
//	opts := runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}
//	run, err := runstate.Open(ctx, s, opts)
//	items, err := openaigo.OutputItems(resp)
//	if ids := openaigo.NeedsApproval(items, needsHuman); len(ids) > 0 {
//		err = openaigo.Interrupt(ctx, run, resp, ids) // the process may exit
//	}
//	// later, in any process:
//	run, err = runstate.Open(ctx, s, opts)             // recovers what a killed process left
//	calls, err := openaigo.AwaitingCalls(ctx, run, s)  // run.Next(): runstate.NextApproval
//	for _, c := range calls {
//		if !approved(c) {
//			err = openaigo.Output(ctx, run, rejection(c)) // a rejection needs no claim
//			continue
//		}
//		err = openaigo.RunTool(ctx, run, c, tool)      // claim, run the tool, record its output
//		if errors.Is(err, session.ErrCheckpointConflict) || errors.Is(err, runstate.ErrInDoubt) {
//			return err                                  // another process claimed it: its tool did not run here
//		}
//	}
//	err = run.Settle(ctx)                              // calls and outputs land in one ordered append
//	// the next model call, then openaigo.Finish(ctx, run, resp)
//
// A process killed after a claim and before the call's output is recorded
// leaves the call in doubt: the next Open reports it in run.InDoubt() and
// InDoubtCalls (run.Next() is runstate.NextResolve), never in
// run.Awaiting(), so it is not offered for approval again. The caller asks
// the tool's system whether it acted on the call id (the natural
// idempotency key) and resolves the call: Output with what it did,
// run.Reclaim then RunTool to run it again on purpose, or run.Abandon to
// tell the model the outcome is unknown.
//
// What holds, on every store that keeps checkpoints:
//
//   - the history, exactly once: every call and output lands once, in
//     order, whatever process dies at whatever instant;
//   - a claimed tool (RunTool, Claim), at most once: of two processes
//     resuming one parked run, one claims and runs the tool and the other
//     gets an error wrapping session.ErrCheckpointConflict (or
//     runstate.ErrInDoubt) before its tool runs; after a crash inside the
//     tool the call is in doubt until the caller resolves it, and it runs
//     again only if the caller reclaims it;
//   - a tool run without a claim (Output alone), at least once: a crash
//     between its side effect and its Output offers the call for approval
//     again, and a second process may run it at the same time.
//
// # Compaction
//
// NewCompactionSession wraps any session in the Python and JS SDKs'
// compaction session: after a saved turn the runner asks it to compact,
// ShouldCompact decides (10 candidates by default: every item but user
// messages and compaction items), and the output of the API's compact
// endpoint (the user messages, then one opaque compaction item) becomes
// the history. runstate.Run drives it as the Python runner does: after
// each saved turn with a response id, once its checkpoint holds nothing
// pending; deferred, then forced at the next turn, when the turn carries
// tool outputs or while anything of the run stands open (an awaited,
// claimed or held call), so a call is never cut from its output:
//
//	s, err := openaigo.NewCompactionSession(store, &client, openaigo.CompactionOptions{})
//	run, err := runstate.Open(ctx, s, opts)
//	err = openaigo.Turn(ctx, run, resp)           // saved, then compacted if due
//
// Unlike Python's, which clears the session and adds the output, the
// history is replaced atomically against the version the compaction read
// (session.VersionedReplacer, on every adapter of this library): a turn
// another process appends while the compact request is out is kept after
// the compacted output, and a process killed at any instant leaves the
// old history or the compacted one, never an empty one. The wrapper
// refuses a session whose history the API keeps (ErrServerHistory), such
// as a ConversationsSession.
//
// Items that rode a checkpoint document come back from it with sorted keys
// (the document is written in the Python RunState layout), so a withheld
// response resumed by another process lands JSON-equal to what the API
// sent, not byte-identical; resumed in the same process it lands as sent.
package openaigo
