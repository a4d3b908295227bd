package postgres

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentsessions/sessions/session"
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

// maxIndexEntry is the most bytes a btree entry (version 4, 8 kB pages)
// holds. An id longer than that, less what the other columns of an index
// take, fits only as far as PostgreSQL compresses it.
const maxIndexEntry = 2704

// IDTooLongError reports a session id (or, on a checkpoint save, the
// session id with the checkpoint's name) too long for an index entry:
// PostgreSQL refused the write and nothing was written. It wraps
// session.ErrInvalidSessionID.
type IDTooLongError struct {
	ID     string // the caller's id
	Stored int    // bytes of its stored form (an escaped id takes 2 per byte, plus 6)
	Limit  int    // the most bytes an index entry holds, after compression
	Err    error  // PostgreSQL's error
}

func (e *IDTooLongError) Error() string {
	return fmt.Sprintf("postgres: session id %s (%d bytes stored) does not fit an index entry of at most %d bytes, even compressed: %v",
		quoteShort(e.ID), e.Stored, e.Limit, e.Err)
}

// Unwrap returns session.ErrInvalidSessionID and PostgreSQL's error.
func (e *IDTooLongError) Unwrap() []error { return []error{session.ErrInvalidSessionID, e.Err} }

// idError turns PostgreSQL's refusal of an index entry too large
// (SQLSTATE 54000, "index row size ... exceeds ... maximum") into an
// IDTooLongError; it leaves every other error as it is. The only values
// this package indexes that a caller makes as long as it likes are
// session ids and checkpoint names.
func (s *Session) idError(err error) error {
	var tl *IDTooLongError
	if errors.As(err, &tl) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "54000" && strings.Contains(pgErr.Message, "index row") {
		return &IDTooLongError{ID: s.id, Stored: len(s.sid), Limit: maxIndexEntry, Err: err}
	}
	return err
}

// quoteShort quotes s for an error message, cut at a character boundary
// after 40 bytes or so.
func quoteShort(s string) string {
	const keep = 40
	if len(s) <= keep {
		return strconv.Quote(s)
	}
	cut := keep
	for cut > keep-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
