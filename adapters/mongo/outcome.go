package mongo

import (
	"context"
	"errors"

	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/agentsessions/sessions/session"
)

// outcomeUnknown is the error of a commit (the update that makes an
// append, a pop or a clear take effect) that may have been applied: it
// wraps session.ErrOutcomeUnknown and the cause.
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return session.ErrOutcomeUnknown.Error() + ": " + e.err.Error()
}

func (e *outcomeUnknown) Unwrap() []error { return []error{session.ErrOutcomeUnknown, e.err} }

// committing classifies err, from a commit's update: the outcome is
// unknown after a network error or a timeout (the server may have applied
// the update and the reply been lost), a cancelled context (the driver
// stops waiting for a reply, not the server), or a write concern error
// (applied on the primary, not acknowledged as asked). Any other error is
// the server's refusal, or one raised before sending: nothing was applied.
func committing(err error) error {
	if err == nil || errors.Is(err, session.ErrOutcomeUnknown) {
		return err
	}
	var wce mongodrv.WriteException
	if mongodrv.IsNetworkError(err) || mongodrv.IsTimeout(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &wce) && wce.WriteConcernError != nil) {
		return &outcomeUnknown{err}
	}
	return err
}
