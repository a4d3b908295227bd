// Package conformance is the one suite every Session adapter and shim
// passes. An adapter author implements Harness (fresh sessions, a second
// independent handle on the same store, the declared capabilities) and calls
// Run from the adapter's own _test.go; Check runs the same clauses without
// the testing package and returns a Report, as `sessionctl check` does.
//
// Capabilities are checked both ways: a declared capability must be
// implemented, and an implemented one must be declared. The report grades
// the store FULL (the base clauses and every standard capability pass),
// BASE+PARTIAL (the base clauses and some capabilities pass), BASE (only the
// base clauses pass) or NONE.
package conformance
