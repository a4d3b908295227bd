package mongo

import (
	"context"
	"errors"
	"strings"

	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/agentsessions/sessions/session"
)

// minUnindexableKey is the fewest bytes of a session id (with, on a
// checkpoint call, the checkpoint's name) that a server refusing an index
// entry as too large is taken to have refused. PostgreSQL's btree entries
// hold at most 2704 bytes, and an entry is its key's bytes, compressed when
// that helps, plus a few dozen bytes: no shorter key can overflow one.
const minUnindexableKey = 2048

// Server messages (from PostgreSQL, relayed by FerretDB on its PostgreSQL
// backend as an InternalError) that say a value could not be stored.
const (
	// sqlstateUntranslatable is jsonb's refusal of \u0000 ("unsupported
	// Unicode escape sequence"), in a filter as in a document.
	sqlstateUntranslatable = "SQLSTATE 22P05"
	// sqlstateTooLarge is an index entry too large ("index row size N
	// exceeds btree version 4 maximum 2704", "index row requires N bytes,
	// maximum size is 8191").
	sqlstateTooLarge = "SQLSTATE 54000"
)

// idRefusedError is a server's refusal of a session id (or checkpoint
// name) it cannot store: MongoDB stores any UTF-8 id, but FerretDB on
// PostgreSQL cannot store or even look up a string holding NUL, nor index
// one of some 2.7 kB. It wraps session.ErrInvalidSessionID and the
// server's error.
type idRefusedError struct {
	why string
	err error
}

func (e *idRefusedError) Error() string {
	return "mongo: " + session.ErrInvalidSessionID.Error() + ": " + e.why + ": " + e.err.Error()
}

func (e *idRefusedError) Unwrap() []error { return []error{session.ErrInvalidSessionID, e.err} }

// refusedID turns *errp, the error of a call on session id (and, for a
// checkpoint call, checkpoint name; "" otherwise), into an idRefusedError
// when it is a server's error reply refusing the id: a reply naming
// PostgreSQL's refusal of NUL for an id or name that holds NUL, or of an
// index entry too large for an id and name of at least minUnindexableKey
// bytes. Any other error is left as it is: a network error, a timeout, a
// cancelled context, an outcome unknown, and any reply that the id cannot
// have caused. MongoDB never gives such a reply for an id, so nothing
// changes there.
func refusedID(errp *error, id, name string) {
	err := *errp
	if err == nil || errors.Is(err, session.ErrInvalidSessionID) || errors.Is(err, session.ErrOutcomeUnknown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		mongodrv.IsNetworkError(err) || mongodrv.IsTimeout(err) {
		return
	}
	msg, ok := serverMessage(err)
	if !ok {
		return
	}
	switch {
	case strings.Contains(msg, sqlstateUntranslatable) && (strings.Contains(id, "\x00") || strings.Contains(name, "\x00")):
		what := "session id"
		if !strings.Contains(id, "\x00") {
			what = "checkpoint name"
		}
		*errp = &idRefusedError{why: "the server cannot store a " + what + " holding NUL", err: err}
	case strings.Contains(msg, sqlstateTooLarge) && strings.Contains(msg, "index row") && len(id)+len(name) >= minUnindexableKey:
		what := "session id"
		if name != "" {
			what = "session id with the checkpoint name"
		}
		*errp = &idRefusedError{why: "the server cannot index a " + what + " this long", err: err}
	}
}

// serverMessage returns the messages of err's server error reply (a
// command error, or a write exception's write errors); ok is false when
// err holds none, or a write concern error (the write may have been
// applied).
func serverMessage(err error) (msg string, ok bool) {
	var we mongodrv.WriteException
	if errors.As(err, &we) {
		if we.WriteConcernError != nil || len(we.WriteErrors) == 0 {
			return "", false
		}
		msgs := make([]string, len(we.WriteErrors))
		for i, e := range we.WriteErrors {
			msgs[i] = e.Message
		}
		return strings.Join(msgs, "\n"), true
	}
	var ce mongodrv.CommandError
	if errors.As(err, &ce) {
		return ce.Message, true
	}
	return "", false
}
