// Package contract is the Session contract every adapter honours, as a list
// of clauses: reads oldest first, batches atomic and contiguous, pop and
// clear, ids confined, corrupt records isolated and reported, cancellation,
// concurrent writers, declared capabilities implemented (and the reverse),
// latest-N, atomic replace, run-context awareness, TTL, run-state
// checkpoints (versioned saves, and appends committed with a checkpoint),
// conditional replaces, following a history from a cursor (natively and
// through ReadSince's fallback), and appends at most once per operation id.
//
// It imports neither runstate nor legacy. conformance.Run runs it on an
// adapter twice: natively, and through HideCapabilities, which is how the
// session package's fallbacks (and a Python-style session with no optional
// method) see the store.
package contract

import (
	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// Clauses returns the contract's clauses, base clauses first.
func Clauses() []suite.Clause {
	base := func(name string, run func(*suite.C)) suite.Clause {
		return suite.Clause{Name: name, Group: suite.GroupBase, Run: run}
	}
	capability := func(name string, c session.Capability, run func(*suite.C)) suite.Clause {
		return suite.Clause{Name: name, Group: suite.GroupFor(c), Needs: c, Run: run}
	}
	return []suite.Clause{
		base("core/empty-session", clauseEmptySession),
		base("core/order", clauseOrder),
		base("core/batch-contiguity", clauseBatchContiguity),
		base("core/round-trip", clauseRoundTrip),
		base("core/empty-batch", clauseEmptyBatch),
		base("core/pop", clausePop),
		base("core/pop-empty", clausePopEmpty),
		base("core/clear", clauseClear),
		base("core/isolation", clauseIsolation),
		base("core/peer-visibility", clausePeerVisibility),
		base("input/rejected-items", clauseRejectedItems),
		base("ids/hostile", clauseHostileIDs),
		base("ids/empty", clauseEmptyID),
		base("corrupt/isolated", clauseCorrupt),
		base("cancel/before-call", clauseCancelled),
		{Name: "core/after-close", Group: suite.GroupBase, Hook: isCloser, Run: clauseAfterClose},
		base("concurrency/two-handles", clauseConcurrentWriters),
		base("capabilities/declared-implemented", clauseDeclaredImplemented),
		base("capabilities/implemented-declared", clauseImplementedDeclared),
		base("limit/fallback-table", func(c *suite.C) { limitTable(c, coreOnly{}.wrap) }),
		base("follow/fallback-semantics", func(c *suite.C) { followSemantics(c, coreOnly{}.wrap) }),
		capability("limit/native-table", session.CapLatest, func(c *suite.C) { limitTable(c, nil) }),
		capability("limit/native-matches-fallback", session.CapLatest, clauseLimitMatches),
		capability("replace/semantics", session.CapReplace, clauseReplace),
		capability("replace/atomic", session.CapReplace, clauseReplaceAtomic),
		capability("run-context/accepts", session.CapRunContext, clauseRunContext),
		capability("ttl/expires-together", session.CapTTL, clauseTTL),
		capability("ttl/refresh-on-write", session.CapTTL, clauseTTLRefresh),
		capability("checkpoints/versioned-crud", session.CapCheckpoints, clauseCheckpointCRUD),
		capability("checkpoints/stale-version-conflict", session.CapCheckpoints, clauseCheckpointStale),
		capability("checkpoints/concurrent-saves", session.CapCheckpoints, clauseCheckpointConcurrent),
		capability("checkpoints/isolated", session.CapCheckpoints, clauseCheckpointIsolated),
		also(capability("checkpoints/ttl", session.CapCheckpoints, clauseCheckpointTTL), session.CapTTL),
		capability("checkpoint-commit/atomic", session.CapCheckpointCommit, clauseCommitAtomic),
		capability("checkpoint-commit/observed-atomically", session.CapCheckpointCommit, clauseCommitObserved),
		capability("versioned-replace/semantics", session.CapVersionedReplace, clauseVersionedSemantics),
		capability("versioned-replace/beside-writers", session.CapVersionedReplace, clauseVersionedBesideWriters),
		capability("follow/semantics", session.CapFollow, func(c *suite.C) { followSemantics(c, nil) }),
		capability("follow/beside-writers", session.CapFollow, clauseFollowBesideWriters),
		capability("follow/equal-rewrite", session.CapFollow, clauseFollowEqualRewrite),
		capability("append-once/semantics", session.CapAppendOnce, clauseAppendOnceSemantics),
		capability("append-once/concurrent", session.CapAppendOnce, clauseAppendOnceConcurrent),
	}
}

// also makes cl need a second capability: where it is not declared the
// clause does not apply (suite.Clause.Also).
func also(cl suite.Clause, c session.Capability) suite.Clause {
	cl.Also = c
	return cl
}

// Shorthands over suite.C.

func all(c *suite.C, s session.Session) []session.Item { c.Helper(); return c.All(s) }
func add(c *suite.C, s session.Session, items []session.Item) {
	c.Helper()
	c.Add(s, items)
}
func requireItems(c *suite.C, want, got []session.Item, msgAndArgs ...any) {
	c.Helper()
	c.RequireItems(want, got, msgAndArgs...)
}

// numbered is suite.Numbered.
func numbered(tag string, n int) []session.Item { return suite.Numbered(tag, n) }
