// Package loadtest holds the front door under load (issue 36, item 5):
// concurrent approval runs of runstate.Run driven by three child processes
// on one store, a share of them killed with SIGKILL and resumed by another
// process. The tests are in loadtest_test.go; docs/reliability.md has the
// results ("The front door under load").
//
// Each of a pool of sessions carries one approval run: Open, Input,
// Interrupt (the call withheld under the output-guardrail gate), then,
// in whichever process picks it up (sometimes two at once), Claim, the
// tool, Output, Settle and Finish. The tool's side effect is a line in its
// process's log file, fsynced before the tool returns; a call found in
// doubt after a kill is resolved by asking every process's log: found, its
// output is recorded; not found, it is reclaimed and run.
package loadtest
