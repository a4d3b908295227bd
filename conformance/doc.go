// Package conformance is the one suite every Session adapter and shim
// passes. An adapter author implements Harness (fresh sessions, a second
// independent handle on the same store, the declared capabilities) and
// calls Run from the adapter's own _test.go:
//
//	func TestConformance(t *testing.T) {
//		rep := conformance.Run(t, newHarness(t), conformance.Options{})
//		if rep.Level != conformance.LevelFull {
//			t.Errorf("want FULL: %s", rep.Summary())
//		}
//	}
//
// Check runs the same clauses without the testing package and returns the
// Report, as `sessionctl check` does.
//
// The suite has three parts, each graded on its own:
//
//   - contract (33 clauses): the Session contract (package
//     conformance/contract) on the harness as it is. Capabilities are checked both ways: a declared
//     capability must be implemented, and an implemented one declared.
//   - contract (capabilities hidden): the same clauses through
//     HideCapabilities, the session package's fallbacks, as a caller with a
//     plain Session (the legacy no-argument path) sees the store. It
//     grades BASE at best, as it declares nothing.
//   - held-write (144 clauses): held-write settlement (package conformance/heldwrite),
//     runstate's held pending write driven by a scripted agent loop, with
//     every session call of a settle faulted in turn. The 48 clauses of
//     its stored mode, which keeps the checkpoint in the store's own
//     checkpoints, run and count where checkpoints are declared.
//
// A part grades FULL (its required clauses, every declared capability and
// the standard ones pass), BASE+PARTIAL, BASE, or NONE (a required clause
// failed, was skipped or did not run). A clause that needs a capability
// the harness does not declare is skipped and does not count. The store's
// Level is the contract's, or NONE when another part is NONE.
//
// The corrupt-record clause needs the harness to write raw records
// (driver.RawAppender) and to hand back the adapter's reports
// (CorruptReporter, see driver.CorruptLog); without them it skips and the contract
// cannot grade FULL. TTL clauses need TTLHarness; the checkpoints/ttl
// clause runs where both checkpoints and ttl are declared, and does not
// count where ttl is not.
//
// Every session the suite writes has an id starting with ProbePrefix and
// is cleared when its clause ends, passed, failed or interrupted (its
// checkpoints deleted, when it is a session.CheckpointStore, and the
// session removed, when the harness is a Remover), so Check can run
// against a store that holds users' sessions.
package conformance
