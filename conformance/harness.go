package conformance

import (
	"context"
	"time"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Harness gives the suite access to one store under test.
type Harness interface {
	// Name names the store in reports, e.g. "sqlite" or "redis-cluster".
	Name() string
	// Open returns a handle on session id. The suite writes only ids that
	// start with ProbePrefix and are unique to the run, and clears each
	// one when its clause ends, so Open need not clean anything.
	Open(ctx context.Context, id string) (session.Session, error)
	// OpenPeer returns a handle on session id through a second, independent
	// client or connection on the same store: another process, in effect.
	OpenPeer(ctx context.Context, id string) (session.Session, error)
	// Declared returns the capabilities the adapter declares.
	Declared() session.Capabilities
}

// The corrupt-record clause runs on harnesses that implement both
// driver.RawAppender (store a record the adapter would refuse; an error
// wrapping session.ErrUnsupported skips the clause, which keeps the grade
// below FULL) and CorruptReporter.

// CorruptReporter is implemented by harnesses that collect the adapter's
// corrupt-record reports (see driver.CorruptLog).
type CorruptReporter interface {
	// CorruptReports returns the reports the adapter made so far about
	// corrupt records of session id.
	CorruptReports(id string) []driver.CorruptRecord
}

// TTLHarness is implemented by harnesses of stores with the TTL capability.
// An OpenTTL error wrapping session.ErrUnsupported skips the TTL clauses.
type TTLHarness interface {
	// OpenTTL returns a handle on session id whose data expire ttl after the
	// last write.
	OpenTTL(ctx context.Context, id string, ttl time.Duration) (session.Session, error)
	// Advance lets d pass: a fake clock moves, a real one sleeps.
	Advance(d time.Duration)
	// MinTTL is the shortest TTL the store keeps exactly (a real server's
	// clock resolution); the TTL clauses use multiples of it.
	MinTTL() time.Duration
}

// Closer is implemented by harnesses that can show a session after its
// store was closed: OpenClosed returns a handle on session id in a store of
// its own (same backend, same options) that it has already closed. The
// clause core/after-close checks that every call on it fails with
// session.ErrClosed; a harness that is not a Closer is not graded on it.
type Closer interface {
	OpenClosed(ctx context.Context, id string) (session.Session, error)
}

// Remover is implemented by harnesses whose store keeps a trace of a
// cleared session: MongoDB keeps the session document, with the counters
// Python's clear_session keeps. When a clause ends, the suite clears every
// session it used and then, if the harness is a Remover, removes it, so
// that nothing of a check remains.
type Remover interface {
	// RemoveSession deletes everything the store holds for session id.
	RemoveSession(ctx context.Context, id string) error
}

// The parts check these interfaces by their suite twins; both have the
// same method sets.
var (
	_ suite.Harness         = Harness(nil)
	_ Harness               = suite.Harness(nil)
	_ suite.TTLHarness      = TTLHarness(nil)
	_ TTLHarness            = suite.TTLHarness(nil)
	_ suite.CorruptReporter = CorruptReporter(nil)
	_ CorruptReporter       = suite.CorruptReporter(nil)
	_ suite.Remover         = Remover(nil)
	_ Remover               = suite.Remover(nil)
)

// ProbePrefix starts the id of every session the suite writes:
// agentsessions-check:<run>:<part>:<clause>:<suffix>.
const ProbePrefix = suite.ProbePrefix

// Numbered returns n items {"type":"message","role":"user","content":"<tag>-<i>"}.
func Numbered(tag string, n int) []session.Item { return suite.Numbered(tag, n) }
