package postgres

import (
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// escapedPrefix starts the stored form of a session id PostgreSQL's text
// cannot hold as it is. It begins with ESC (U+001B), which no sensible id
// does.
const escapedPrefix = "\x1bhex:"

// storedID returns the session_id value for id. An id PostgreSQL can store
// (valid UTF-8, no NUL byte) is stored as it is, so Python and Go name a
// session alike. Any other id, and any id that already starts with
// escapedPrefix, is stored as escapedPrefix followed by its bytes in hex:
// the mapping is one-to-one, so every id keeps a session of its own.
func storedID(id string) string {
	if utf8.ValidString(id) && !strings.Contains(id, "\x00") && !strings.HasPrefix(id, escapedPrefix) {
		return id
	}
	return escapedPrefix + hex.EncodeToString([]byte(id))
}

// sessionID inverts storedID. A stored id that starts with escapedPrefix
// but is not followed by hex (a foreign writer's) is returned as it is.
func sessionID(stored string) string {
	rest, ok := strings.CutPrefix(stored, escapedPrefix)
	if !ok {
		return stored
	}
	b, err := hex.DecodeString(rest)
	if err != nil || storedID(string(b)) != stored {
		return stored
	}
	return string(b)
}
