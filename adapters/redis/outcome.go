package redis

import (
	"errors"
	"net"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
)

// outcomeUnknown is the error of a write whose command may have run on
// the server: it wraps session.ErrOutcomeUnknown and the cause. (The
// PostgreSQL and MongoDB adapters have the same type; what differs is how
// each driver's errors are classified.)
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return session.ErrOutcomeUnknown.Error() + ": " + e.err.Error()
}

func (e *outcomeUnknown) Unwrap() []error { return []error{session.ErrOutcomeUnknown, e.err} }

// sent classifies err, the error of a write's commands (each sent at most
// once: see once): it is returned as it is when the write provably did not
// happen, and wrapped in an outcomeUnknown otherwise. Provably not
// happened means one of:
//
//   - nothing was sent: the client was closed (goredis.ErrClosed), no
//     connection could be had from the pool (ErrPoolTimeout,
//     ErrPoolExhausted) or dialled (a *net.OpError of Op "dial": go-redis
//     dials before it writes, and a redirected command that fails to dial
//     its new node was refused by the old one);
//   - the server answered with an error reply (a goredis.Error: ERR,
//     WRONGTYPE, OOM, NOSCRIPT, READONLY, CLUSTERDOWN, a script's own
//     error, ...): each script of this package makes its first write only
//     once nothing after it can fail (see scripts.go), so a script that
//     failed wrote nothing, and a refused command ran nothing.
//
// Anything else happened after the command may have been written, or
// cannot be told apart from that: the connection closed or reset while
// the reply was awaited (io.EOF, ECONNRESET), a read timeout, a write
// error (part of a pipeline of several callers' commands may have gone
// out before it), a cancelled context, a reply the client could not
// parse. The write may have run: ErrOutcomeUnknown.
func sent(err error) error {
	if err == nil || errors.Is(err, session.ErrOutcomeUnknown) || notSent(err) || answered(err) {
		return err
	}
	return &outcomeUnknown{err}
}

// notSent reports whether err says that go-redis sent nothing.
func notSent(err error) bool {
	if errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) ||
		errors.Is(err, goredis.ErrPoolExhausted) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answered reports whether err is the server's error reply.
func answered(err error) bool {
	var re goredis.Error
	return errors.As(err, &re)
}
