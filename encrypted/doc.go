// Package encrypted wraps any Session so that items are stored encrypted,
// byte-compatible with the Python Agents SDK's EncryptedSession: either
// language reads what the other wrote.
//
// Each item is stored as the envelope
//
//	{"__enc__": 1, "v": 1, "kid": "<key id>", "payload": "<Fernet token>"}
//
// where the token (the Fernet spec: AES-128-CBC and HMAC-SHA256) encrypts the
// item's JSON with a per-session key: HKDF-SHA256 (32 bytes, salt = the
// session id's UTF-8 bytes, info "agents.session-store.hkdf.v1") of the
// master key. A master key that base64url-decodes to 32 bytes, as Python's
// decoder reads it, is used as those bytes; any other string as its UTF-8
// bytes. Python's EncryptedSession writes the key id "hkdf-v1"
// (DefaultKeyID) and ignores it on reading.
//
// Where this package differs from Python's, on purpose:
//
//   - A wrong key, a tampered token or an expired token fails the read with
//     a *DecryptError naming the session, the key id and the position of the
//     item. Python drops such items silently, and its default token TTL of
//     600 s empties a session ten minutes after its last write (the SDK's
//     issue #5005). Nothing is ever deleted or hidden here: PopItem checks
//     the newest item before it removes it.
//   - Token expiry is off unless Options.TokenTTL asks for it.
//   - Several keys may be given, by id: new items use the first (the
//     primary), so keys rotate without rewriting history. A read tries the
//     key the envelope names first, then every other key in Options.Keys
//     order, moving on only when a token's signature does not match; so an
//     envelope whose "kid" is null or names a key Go calls otherwise is
//     read as Python reads it, at the cost of one HMAC per key tried.
//   - The plaintext is the item's own bytes. Python encrypts
//     json.dumps(item, separators=(",", ":"), ensure_ascii=False); both read
//     either form, and ours returns every item byte for byte.
//
// Like Python's, a stored item that is not an envelope (written before
// encryption was enabled) is returned as it is.
//
// The wrapper keeps the wrapped session's capabilities: latest-N reads and
// replace stay what the backend makes them (O(limit), atomic), expiry passes
// through, following reads only what is new (cursors are the backend's, over
// the envelopes it stores), appends keyed by an operation id stay at most
// once, and the run context and id-insensitivity answers are the wrapped
// session's. Compaction does not pass through: a backend would compact
// ciphertext.
package encrypted
