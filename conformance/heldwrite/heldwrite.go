// Package heldwrite is the held-write settlement suite: a scripted agent
// loop (a canned model, tools, approvals, output guardrails, detached runs)
// drives the runstate package against the store under test, through the
// scenarios of the Python SDK's held pending Session write (semantics §5.1)
// and ordinary pending write (§5.2), each once with the checkpoint kept
// live and once carried through JSON, and through a fault matrix that
// breaks every session call of a settle and of its recovery.
//
// A store passes when every scenario ends with the exact history: every
// call before its output, nothing duplicated or lost, each approved tool
// run once. conformance.Run runs it on every adapter.
package heldwrite

import (
	"sync"

	"github.com/agentsessions/sessions/conformance/suite"
)

// Group is the group of every held-write clause; all are required.
const Group suite.Group = "held-write"

var (
	registryMu sync.Mutex
	registry   []suite.Clause
)

// register adds clauses to the suite; each file registers its own from init.
func register(cs ...suite.Clause) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, cs...)
}

// Clauses returns the held-write clauses.
func Clauses() []suite.Clause {
	registryMu.Lock()
	defer registryMu.Unlock()
	return append([]suite.Clause(nil), registry...)
}
