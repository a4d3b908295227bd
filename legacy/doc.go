// Package legacy keeps sessions of older or foreign shapes working with
// this library: a shim that hides a session's optional capabilities (the
// shape of a session written before limit reads or run-context awareness
// existed), adapters for other Go session shapes, and the Python SDK's
// storage layouts and checkpoints.
//
// Every shim passes the conformance suite, so code written against
// session.Session cannot tell a shimmed session from a native one, except
// by what session.Probe reports.
package legacy
