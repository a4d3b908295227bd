// Package dapr is the Session adapter for any Dapr state store, in the
// layout and with the concurrency of the Python Agents SDK's DaprSession
// (agents.extensions.memory.dapr_session), over the Dapr state API of
// github.com/dapr/go-sdk: a Go process and a Python agent share sessions.
//
//	st, err := dapr.Open(ctx, "localhost:50001", dapr.Options{StoreName: "statestore"})
//	defer st.Close()
//	s, err := st.Session("user-123")
//	err = s.AddItems(ctx, items)
//
// New wraps a client the caller built (and keeps owning); Open dials the
// sidecar's gRPC address and closes that connection on Close, as Python's
// from_address owns its client. Importing the package registers the
// dapr:// scheme with package adapters (see Scheme):
// adapters.Open(ctx, "dapr://localhost:50001/statestore?consistency=strong").
//
// # Layout
//
// A session is two state keys (daprd stores them as "<app id>||<key>"):
//
//	<id>:messages   a JSON array, oldest first, of JSON strings, each one item's JSON text;
//	                written as Python's json.dumps(list, separators=(",", ":")), the strings
//	                ensure_ascii; an item Go wrote keeps its bytes, one Python wrote is
//	                json.dumps(item, separators=(",", ":"))
//	<id>:metadata   {"session_id": <id>, "created_at": "<unix s>", "updated_at": "<unix s>"},
//	                json.dumps with its default separators; both times are rewritten by every
//	                append, as Python does
//
// A Python and a Go process share a session when their sidecars use the
// same state store component and the same key prefix: by default daprd
// prefixes keys with the app id, so give both the same app id, or set the
// component's keyPrefix metadata to "name" or "none".
//
// Reads send the state metadata {"consistency": <level>}; writes send state
// options with that consistency, and "ttlInSeconds" state metadata when
// Options.TTL is set, exactly as the Python class. Ids holding "||" (daprd
// refuses them) or invalid UTF-8 (a protobuf string) are refused with
// session.ErrInvalidSessionID.
//
// # Concurrency
//
// Every write rewrites the whole array: it reads the array and its ETag
// and saves the new array under that ETag with first-write concurrency.
// When another writer changed the array in between, the store refuses the
// save (daprd answers Aborted; the Redis state store's script error when
// two writers race to create the key), and the write is tried again after
// 50 ms·2^(n-1), at most 1 s, plus up to 10% jitter, up to
// Options.MaxAttempts (5, Python's) tries in all; then it fails with
// ErrConflict, and nothing of it was written. Writes of one session
// through one Store are serialized in the process (64 lock stripes by id),
// as Python serializes them per session object, so they do not conflict
// with each other. As in Python, every write costs one read and one save
// of the whole array: its time grows with the history.
//
// AddItems then saves the metadata (last-write); a failure there is only
// logged, since the items are committed. PopItem with a TTL saves the
// metadata too, so that both keys expire together (Python's pop_item does
// not). Clear deletes the messages, then the metadata.
//
// # Outcomes
//
// A save or delete that fails other than by a stale ETag or a refusal
// daprd answers before calling the store (InvalidArgument,
// FailedPrecondition, NotFound, PermissionDenied, Unauthenticated,
// Unimplemented) wraps session.ErrOutcomeUnknown: the reply may have been
// lost after the store committed it. daprd's Redis client retries a
// command whose reply it lost, and the retry's ETag check then fails
// against the try's own write: so a conflict is followed by a check, and
// when the session holds what the conflicting try wrote (possibly with
// more after it), the write wraps session.ErrOutcomeUnknown instead of
// being applied twice. Python's class retries there.
//
// # Corrupt records
//
// An array element that is neither a JSON string holding a JSON object
// nor a JSON object is skipped by reads and reported through
// Options.OnCorrupt ("index N"). A stored value that is not a JSON array
// reads as empty and is reported ("value"); AddItems, PopItem and
// ReplaceItems never overwrite it (AddItems and ReplaceItems fail with
// session.ErrCorruptRecord, as Python's add_items raises), and
// ReplaceItemsIf with its version does. PopItem pops the newest readable
// item and keeps unreadable records above it in place, reported
// ("index N (kept)"); Python's pop_item removes them.
//
// # Capabilities
//
// Session implements session.LatestReader (one read of the array, walked
// back from its end), session.Replacer and session.VersionedReplacer (the
// version is the SHA-256 of the stored array; the replace is one save
// under the ETag read with it). It implements no session.Expirer: the
// Dapr state API does not tell how long a key has left (the Redis state
// store of Dapr 1.14 returns no expiry), so ExpiresIn could not be
// answered; Options.TTL is still written as Python writes it.
package dapr
