// Package session defines the conversation-history Session of an agent
// runtime: the Item it stores, the small core interface every backend
// implements, and the optional capabilities a backend may add.
//
// The design follows database/sql/driver. Session is the required interface;
// LatestReader, RunContextAware, Replacer, Expirer and CompactionAware are
// optional and found by type assertion. The package-level functions (Latest,
// All, Append, Pop, Clear, Replace) are what callers use: each one uses a
// capability when the session has it and otherwise falls back to the core
// interface with the same contract, so every backend, shim and fallback
// answers identically.
//
// Semantics fixed for every implementation:
//
//   - Items are JSON objects, stored and returned byte for byte. The
//     NaN, Infinity and -Infinity tokens that Python's json.dumps writes for
//     non-finite floats (and json.loads reads) are accepted, so a record a
//     Python writer left is an item, not a corrupt record; those exact
//     spellings only, as in CPython.
//   - AddItems appends one atomic batch: all items land contiguously and in
//     order, or none do. An empty batch is a no-op.
//   - Reads are oldest first. Latest(n): n > 0 gives the newest n in
//     chronological order, n == 0 gives nothing, n < 0 is ErrInvalidLimit.
//   - PopItem removes and returns the newest item and reports an empty
//     session without an error.
//   - Session ids are opaque strings; the empty id is invalid.
//   - A corrupt stored record never hides valid items, is never the reason
//     another item is deleted, and is reported through a CorruptHandler.
//
// Two packages stand beside this one: session/driver holds what an adapter
// author needs (decoding stored bytes, batch and id checks, corrupt-record
// reports, the raw-write hook), and history holds the Responses-API rules a
// caller applies to what it reads (the call/output pairing, the model-input
// window of ModelInput, diagnosis and repair, the Python SDK's digests).
// docs/semantics.md, cited as "semantics §N", says why each rule is so.
package session
