package redis

import (
	"errors"
	"fmt"
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
// A transaction (MULTI ... EXEC) is the exception: go-redis reports the
// server's refusal of the MULTI itself (an ACL that denies it) as that
// error reply, though the commands after it then ran one by one. Its
// writes pass their error through txSent first.
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

// txSent is sent's first step for err, the error of a transaction of
// cmds run through go-redis's TxPipelined: a MULTI the server refused is
// an outcomeUnknown. go-redis stamps that refusal onto every queued
// command, so it is told by every command holding err; an EXECABORT
// (a command refused when queued: nothing ran) and errors inside EXEC's
// reply are left as they are. (Commands that all failed inside EXEC with
// equal error values are taken for a refused MULTI too: unknown is never
// a wrong answer.)
func txSent(err error, cmds ...goredis.Cmder) error {
	if err == nil || !answered(err) || goredis.IsExecAbortError(err) {
		return err
	}
	for _, c := range cmds {
		if !errors.Is(c.Err(), err) {
			return err
		}
	}
	return &outcomeUnknown{fmt.Errorf("MULTI refused, the commands may have run one by one: %w", err)}
}

// notSent reports whether err says that go-redis sent nothing.
func notSent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, goredis.ErrClosed) || errors.Is(err, goredis.ErrPoolTimeout) ||
		errors.Is(err, goredis.ErrPoolExhausted) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answered reports whether err is the server's error reply.
func answered(err error) bool {
	if err == nil {
		return false
	}
	var re goredis.Error
	return errors.As(err, &re)
}
