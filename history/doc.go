// Package history holds the Responses API's rules for what a caller reads
// from a session.Session: which items pair, which window of a history is
// safe to send to a model, what is wrong with a stored history and how to
// repair it, and the Python SDK's item digests.
//
// # Sending history to a model
//
// ModelInput reads the newest n items of a session (All for every item)
// and returns them as the next request's input, obeying every input rule
// the API enforces (Window does the same for a history kept in memory):
//
//   - a call and its output are sent together or not at all: the pairing
//     table maps each call type to its output type (OutputTypeFor,
//     CallTypeFor), and an output names its call in "call_id" (a
//     local_shell_call_output in the API schema's shape names it in "id";
//     an MCP approval response in "approval_request_id");
//   - a reasoning item is sent with the items that follow it in its
//     response, up to the next user, developer or system message or the
//     next reasoning item: a window that would start inside that run after
//     its reasoning item starts after the run instead (it never grows past
//     n), and a reasoning item whose following item is missing or dropped
//     goes, with the rest of its run;
//   - the keys the Python SDK strips before a model call
//     (MetaToolDescription, MetaToolTitle) are not sent, the stored bytes
//     keep them, and every other byte of an item is sent as it is stored;
//   - an item holding a NaN or infinity (which Python writes and a
//     session.Item keeps) is refused with a *NonFiniteError that names it.
//
// SafeWindow is the pruning alone over a slice, ForModel the stripping and
// checking alone. PruneOrphans and DropOrphanCalls are the Python SDK's own
// prune (drop_orphan_function_calls), for a history the runner resumes.
//
// # Diagnosis and repair
//
// Diagnose reports what makes every later request over a stored history
// fail (an output without an earlier call, a repeated output) and calls
// never answered; RepairHistory removes them.
//
// # Digests
//
// Fingerprint and Digest compute, byte for byte, the Python SDK's
// fingerprint and SHA-256 of an item, which it records for pending Session
// writes (runstate uses them).
package history
