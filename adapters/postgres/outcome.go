package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentsessions/sessions/session"
)

// outcomeUnknown is the error of a write whose commit had been sent when
// it failed: it wraps session.ErrOutcomeUnknown and the cause.
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return session.ErrOutcomeUnknown.Error() + ": " + e.err.Error()
}

func (e *outcomeUnknown) Unwrap() []error { return []error{session.ErrOutcomeUnknown, e.err} }

// sent classifies err, from statements sent together with their commit
// (a pipeline ending in its Sync, or a COMMIT): the outcome is unknown
// unless PostgreSQL reported an ERROR (the transaction rolled back) or pgx
// says nothing was sent.
func sent(err error) error {
	if err == nil || pgconn.SafeToRetry(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Severity == "ERROR" {
		return err
	}
	var unknown *outcomeUnknown
	if errors.As(err, &unknown) {
		return err
	}
	return &outcomeUnknown{err}
}
