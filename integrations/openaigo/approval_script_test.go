package openaigo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// The approval conversation: run k is the user's message u<k>; the model
// answers with reasoning, a function call c<k> that needs approval
// (delete_file) and a hosted MCP approval request mcpr_<k>; the agent has
// output guardrails with stop-on-first-tool, so that turn is withheld and
// parked on the checkpoint; a process (any) approves both, runs the tool,
// records the outputs and settles; the model's final answer (the MCP
// call, reasoning, "done k") finishes the run and leaves the checkpoint idle.

var approvalOpts = runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}

func approvalUser(k int) string { return fmt.Sprintf(`{"role":"user","content":"u%d"}`, k) }

// approvalFirst is the response to u<k>: the turn awaiting approval.
func approvalFirst(k int) []string {
	return []string{
		reasoningItem(fmt.Sprintf("rs_%da", k), "Deleting needs approval."),
		functionCall(fmt.Sprintf("fc_%d", k), fmt.Sprintf("c%d", k), "delete_file", fmt.Sprintf(`{"path":"/tmp/f%d","big":12345678901234567890}`, k)),
		fmt.Sprintf(`{"id":"mcpr_%d","type":"mcp_approval_request","arguments":"{\"page\":%d}","name":"archive_page","server_label":"wiki"}`, k, k),
	}
}

// approvalFinal is the response once both approvals came back.
func approvalFinal(k int) []string {
	return []string{
		fmt.Sprintf(`{"id":"mcp_%d","type":"mcp_call","approval_request_id":"mcpr_%d","arguments":"{\"page\":%d}","error":null,"name":"archive_page","output":"archived","server_label":"wiki","status":"completed"}`, k, k, k),
		reasoningItem(fmt.Sprintf("rs_%db", k), "Both done."),
		assistant(fmt.Sprintf("msg_%d", k), fmt.Sprintf("done %d", k)),
	}
}

func approvalToolOutput(callID string) string {
	return fmt.Sprintf(`{"type":"function_call_output","call_id":%q,"output":"deleted"}`, callID)
}

func approvalMCPResponse(id string) string {
	return fmt.Sprintf(`{"type":"mcp_approval_response","approval_request_id":%q,"approve":true}`, id)
}

// approvalExpected is run k's history, in order, as the API and the
// agent wrote each item.
func approvalExpected(k int) []string {
	f, l := approvalFirst(k), approvalFinal(k)
	return []string{approvalUser(k), f[0], f[1], f[2], approvalToolOutput(fmt.Sprintf("c%d", k)), approvalMCPResponse(fmt.Sprintf("mcpr_%d", k)), l[0], l[1], l[2]}
}

// runOf returns the run an item of the approval conversation belongs to.
func runOf(it session.Item) (int, bool) {
	var s string
	switch {
	case it.Role() == "user":
		c, _ := it.StringField("content")
		s = strings.TrimPrefix(c, "u")
	case it.Type() == "function_call_output":
		s = strings.TrimPrefix(it.CallID(), "c")
	case it.Type() == "mcp_approval_response":
		r, _ := it.StringField("approval_request_id")
		s = strings.TrimPrefix(r, "mcpr_")
	default:
		return 0, false
	}
	k, err := strconv.Atoi(s)
	return k, err == nil && k > 0
}

// approvalAPI answers from the input alone (a killed process may have
// lost a response; its successor asks again and gets the same one).
func approvalAPI(_ int, input []session.Item) [][]byte {
	var out []string
	if len(input) > 0 {
		last := input[len(input)-1]
		if k, ok := runOf(last); ok {
			if last.Role() == "user" {
				out = approvalFirst(k)
			} else {
				out = approvalFinal(k)
			}
		}
	}
	if out == nil {
		out = []string{assistant("msg_unexpected", "unexpected input")}
	}
	b := make([][]byte, len(out))
	for i, s := range out {
		b[i] = []byte(s)
	}
	return b
}

// needsApproval is the agent's policy: delete_file needs a human.
func needsApproval(call session.Item) bool {
	name, _ := call.StringField("name")
	return name == "delete_file"
}

// toolSystem is what the loop knows of the approved tool: run performs
// the call's side effect (durable before it returns), acted asks the
// tool's system whether it acted on a call id (the idempotency key a call
// in doubt is resolved by), and note hears the loop's claim events
// ("claimed", "conflict", "in-doubt", "found", "reclaim").
type toolSystem struct {
	run   func(call session.Item) error
	acted func(callID string) (bool, error)
	note  func(event, callID string)
}

// approvalLoop drives the conversation of n runs on s from wherever an
// earlier (killed) process left it, using only runstate.Run and this
// package: an approved call's tool runs under a claim (RunTool), and a
// call in doubt is resolved by asking the tool's system (Output of what it
// did, or Reclaim and run it again when it did not act). hook is called
// around every model call and after every tool side effect.
func approvalLoop(ctx context.Context, s session.Session, client openai.Client, n int, tools toolSystem, hook func(string)) error {
	run, err := runstate.Open(ctx, s, approvalOpts)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	h := openaigo.New(s, openaigo.Options{})
	model := func() (*responses.Response, error) {
		params, err := h.Params(ctx, e2eBase)
		if err != nil {
			return nil, err
		}
		hook("before model call")
		resp, err := client.Responses.New(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("model call: %s", apiMessage(err))
		}
		hook("after model call")
		return resp, nil
	}
	runTool := func(ctx context.Context, call session.Item) (responses.ResponseInputItemUnionParam, error) {
		tools.note("claimed", call.CallID())
		if err := tools.run(call); err != nil {
			return responses.ResponseInputItemUnionParam{}, err
		}
		return param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(approvalToolOutput(call.CallID()))), nil
	}
	for {
		if len(run.InDoubt()) > 0 {
			calls, err := openaigo.InDoubtCalls(ctx, run, s)
			if err != nil {
				return err
			}
			for _, c := range calls {
				tools.note("in-doubt", c.CallID())
				acted, err := tools.acted(c.CallID())
				if err != nil {
					return err
				}
				if acted {
					tools.note("found", c.CallID())
					if err := openaigo.Output(ctx, run, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(approvalToolOutput(c.CallID())))); err != nil {
						return fmt.Errorf("output found %s: %w", c, err)
					}
					continue
				}
				tools.note("reclaim", c.CallID())
				if err := run.Reclaim(ctx, c.CallID()); err != nil {
					return fmt.Errorf("reclaim %s: %w", c, err)
				}
				if err := openaigo.RunTool(ctx, run, c, runTool); err != nil {
					return fmt.Errorf("run reclaimed %s: %w", c, err)
				}
			}
			continue
		}
		if len(run.Awaiting()) > 0 {
			calls, err := openaigo.AwaitingCalls(ctx, run, s)
			if err != nil {
				return err
			}
			for _, c := range calls {
				if c.Type() == "mcp_approval_request" {
					if err := openaigo.Output(ctx, run, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(approvalMCPResponse(c.ID())))); err != nil {
						return fmt.Errorf("output %s: %w", c, err)
					}
					continue
				}
				// Approved: claimed, run, its output recorded.
				if err := openaigo.RunTool(ctx, run, c, runTool); err != nil {
					if errors.Is(err, session.ErrCheckpointConflict) || errors.Is(err, runstate.ErrInDoubt) {
						tools.note("conflict", c.CallID())
					}
					return fmt.Errorf("run %s: %w", c, err)
				}
			}
			if err := run.Settle(ctx); err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			continue
		}
		if run.Checkpoint().HasHeld() {
			if err := run.Settle(ctx); err != nil {
				return fmt.Errorf("settle held: %w", err)
			}
			continue
		}
		tail, err := session.Latest(ctx, s, 1)
		if err != nil {
			return err
		}
		k, last := 0, ""
		if len(tail) == 1 {
			it := tail[0]
			if kk, ok := runOf(it); ok {
				k = kk
				if it.Role() == "user" {
					last = "user"
				} else {
					last = "approved"
				}
			} else if kk, err := strconv.Atoi(strings.TrimPrefix(it.ID(), "msg_")); err == nil && it.Role() == "assistant" {
				k, last = kk, "done"
			} else {
				return fmt.Errorf("an item the loop never wrote last: %s", it)
			}
		}
		switch last {
		case "", "done":
			// Deletes a checkpoint a kill left after the final append.
			if err := openaigo.Finish(ctx, run, nil); err != nil {
				return fmt.Errorf("finish %d: %w", k, err)
			}
			if k >= n {
				return nil
			}
			if err := openaigo.RunInput(ctx, run, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(approvalUser(k+1)))); err != nil {
				return fmt.Errorf("input %d: %w", k+1, err)
			}
		case "user":
			resp, err := model()
			if err != nil {
				return err
			}
			items, err := openaigo.OutputItems(resp)
			if err != nil {
				return err
			}
			ids := openaigo.NeedsApproval(items, needsApproval)
			if len(ids) == 0 {
				return errors.New("the first response needs no approval")
			}
			if err := openaigo.Interrupt(ctx, run, resp, ids); err != nil {
				return fmt.Errorf("interrupt %d: %w", k, err)
			}
		case "approved":
			resp, err := model()
			if err != nil {
				return err
			}
			if err := openaigo.Finish(ctx, run, resp); err != nil {
				return fmt.Errorf("finish %d: %w", k, err)
			}
		}
	}
}

// noTools is a toolSystem whose tool does nothing and never acted.
var noTools = toolSystem{
	run:   func(session.Item) error { return nil },
	acted: func(string) (bool, error) { return false, nil },
	note:  func(string, string) {},
}
