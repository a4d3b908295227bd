package openaigo

import (
	"context"
	"fmt"
	"slices"

	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The approval flow is runstate.Run driven with openai-go's types. These
// functions only convert (a response's output items by their raw JSON, an
// input item by its bytes) and call the Run; the Run keeps its checkpoint
// in the session's own store (session.CheckpointStore) and does the rest.

// NeedsApproval returns the ids of the calls among items that await a
// human: every call of history's call/output table (function_call,
// custom_tool_call, shell_call, ...) for which needs reports true, keyed by
// call_id, and every hosted MCP approval request, keyed by its id. needs
// nil asks for MCP approval requests only. The ids are in item order.
func NeedsApproval(items []session.Item, needs func(call session.Item) bool) []string {
	var ids []string
	for _, it := range items {
		k, ok := history.CallKey(it)
		if !ok {
			continue
		}
		if k.Type == history.TypeMCPApprovalRequest || (needs != nil && needs(it)) {
			ids = append(ids, k.ID)
		}
	}
	return ids
}

// RunInput persists the run's input items (runstate.Run.Input), each as
// ItemOf makes it.
func RunInput(ctx context.Context, run *runstate.Run, items ...responses.ResponseInputItemUnionParam) error {
	its, err := ItemsOf(items)
	if err != nil {
		return err
	}
	return run.Input(ctx, its...)
}

// Turn persists a response that needs no approval, with the outputs of the
// tools its calls ran (runstate.Run.Turn): resp's output items as the API
// sent them, then outputs.
func Turn(ctx context.Context, run *runstate.Run, resp *responses.Response, outputs ...session.Item) error {
	its, err := OutputItems(resp)
	if err != nil {
		return err
	}
	noteStore(run, resp)
	return run.Turn(ctx, resp.ID, append(its, outputs...)...)
}

// noteStore tells run whether the API stored resp (its "store", which
// openai-go v3.102 keeps among the response's extra fields), for the
// compaction after its turn.
func noteStore(run *runstate.Run, resp *responses.Response) {
	f, ok := resp.JSON.ExtraFields["store"]
	if !ok || resp.ID == "" {
		return
	}
	switch f.Raw() {
	case "true":
		run.ResponseStored(resp.ID, true)
	case "false":
		run.ResponseStored(resp.ID, false)
	}
}

// Interrupt parks a response whose calls await approval
// (runstate.Run.Interrupt): resp's output items as the API sent them, then
// the outputs of the calls that needed none and already ran, with awaiting
// (NeedsApproval's ids) named on the checkpoint. Under output guardrails
// (runstate.Options.OutputGuardrails with a ToolUse other than
// ToolUseRunLLMAgain) the items ride the checkpoint, not the session,
// until Settle; the process may exit once Interrupt returns.
func Interrupt(ctx context.Context, run *runstate.Run, resp *responses.Response, awaiting []string, outputs ...session.Item) error {
	its, err := OutputItems(resp)
	if err != nil {
		return err
	}
	noteStore(run, resp)
	return run.Interrupt(ctx, resp.ID, append(its, outputs...), awaiting...)
}

// AwaitingCalls returns the items of the calls run awaits (run.Awaiting(),
// in that order): what a process that reopened the run needs to show the
// human and, once approved, to run the tool with (RunTool). They are read
// from the checkpoint's held batch when the turn was withheld, and from the
// session otherwise. A claimed call is never among them: see InDoubtCalls.
func AwaitingCalls(ctx context.Context, run *runstate.Run, s session.Session) ([]session.Item, error) {
	return callItems(ctx, run, s, run.Awaiting(), "awaits")
}

// InDoubtCalls returns the items of the calls in doubt (run.InDoubt(), in
// that order): claimed by another process, or by this one before a
// restart, with no output recorded, so their tools may have run or died
// running. Ask each tool's system whether it acted on the call id (the
// natural idempotency key), then resolve the call with Output (the result
// found), run.Reclaim and RunTool (run it again, on purpose) or
// run.Abandon (tell the model its outcome is unknown). Read as
// AwaitingCalls reads.
func InDoubtCalls(ctx context.Context, run *runstate.Run, s session.Session) ([]session.Item, error) {
	return callItems(ctx, run, s, run.InDoubt(), "has in doubt")
}

func callItems(ctx context.Context, run *runstate.Run, s session.Session, ids []string, what string) ([]session.Item, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var pool []session.Item
	if w := run.Checkpoint().Pending; w != nil && w.Held {
		pool = w.Items
	}
	found := callsByID(pool, ids)
	if len(found) < len(ids) {
		all, err := session.All(ctx, s)
		if err != nil {
			return nil, err
		}
		for id, it := range callsByID(all, ids) {
			if _, ok := found[id]; !ok {
				found[id] = it
			}
		}
	}
	out := make([]session.Item, 0, len(ids))
	for _, id := range ids {
		it, ok := found[id]
		if !ok {
			return nil, fmt.Errorf("openaigo: the call %q the run %s is neither on its checkpoint nor in the session", id, what)
		}
		out = append(out, it)
	}
	return out, nil
}

// Claim records that the tool of an approved call is starting
// (runstate.Run.Claim, keyed by the call's call_id, or id for an MCP
// approval request): one versioned save of the stored checkpoint, to make
// before the tool's side effect. Of two processes that claim one call,
// exactly one succeeds; the other gets an error wrapping
// session.ErrCheckpointConflict (or an *runstate.InDoubtError if it
// reopened the run after the winner's claim) and must not run the tool.
// A rejection needs no claim: record it with Output.
func Claim(ctx context.Context, run *runstate.Run, call session.Item) error {
	k, ok := history.CallKey(call)
	if !ok {
		return fmt.Errorf("openaigo: %s is not a call", call.Type())
	}
	return run.Claim(ctx, k.ID)
}

// Tool runs an approved call's tool and returns the output item to record
// (a function_call_output, custom_tool_call_output, ... whose call_id is
// the call's).
type Tool func(ctx context.Context, call session.Item) (responses.ResponseInputItemUnionParam, error)

// RunTool runs an approved call's tool at most once: it claims the call
// (Claim), runs tool only if the claim succeeded, and records the output
// tool returns (Output). A call this Run claimed already (run.Reclaim, to
// run a call in doubt again on purpose) is run without a new claim.
//
// If the claim fails, tool does not run and the error is the claim's. If
// tool fails, or its output cannot be recorded, the call stays claimed:
// this Run may record an output for it (Output, run.Abandon); a process
// that reopens the run finds it in doubt (InDoubtCalls), never awaiting,
// because the tool may have acted.
func RunTool(ctx context.Context, run *runstate.Run, call session.Item, tool Tool) error {
	k, ok := history.CallKey(call)
	if !ok {
		return fmt.Errorf("openaigo: %s is not a call", call.Type())
	}
	if err := run.Claim(ctx, k.ID); err != nil {
		return err
	}
	out, err := tool(ctx, call)
	if err != nil {
		return fmt.Errorf("openaigo: the tool of %s failed (the call stays claimed): %w", k.ID, err)
	}
	return Output(ctx, run, out)
}

// callsByID returns the newest call item of items for each of ids.
func callsByID(items []session.Item, ids []string) map[string]session.Item {
	m := map[string]session.Item{}
	for _, it := range items {
		if k, ok := history.CallKey(it); ok && slices.Contains(ids, k.ID) {
			m[k.ID] = it
		}
	}
	return m
}

// Output records the output of an awaited call (runstate.Run.Output): a
// tool's output item once the call was approved and the tool ran, the
// rejection the model is to see, or an mcp_approval_response for a hosted
// MCP approval request.
func Output(ctx context.Context, run *runstate.Run, output responses.ResponseInputItemUnionParam) error {
	it, err := ItemOf(output)
	if err != nil {
		return err
	}
	return run.Output(ctx, it)
}

// Finish persists the response that ends the run and leaves its
// checkpoint idle (runstate.Run.Finish): resp's output items as the API sent
// them, then outputs. resp nil finishes without a response.
func Finish(ctx context.Context, run *runstate.Run, resp *responses.Response, outputs ...session.Item) error {
	if resp == nil {
		return run.Finish(ctx, "", outputs...)
	}
	its, err := OutputItems(resp)
	if err != nil {
		return err
	}
	noteStore(run, resp)
	return run.Finish(ctx, resp.ID, append(its, outputs...)...)
}
