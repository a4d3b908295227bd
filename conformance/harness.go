package conformance

import (
	"context"
	"time"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Harness gives the suite access to one store under test.
type Harness interface {
	// Name names the store in reports, e.g. "sqlite" or "redis-cluster".
	Name() string
	// Open returns a handle on session id. The suite uses ids no other run
	// uses, so Open need not clean anything.
	Open(ctx context.Context, id string) (session.Session, error)
	// OpenPeer returns a handle on session id through a second, independent
	// client or connection on the same store: another process, in effect.
	OpenPeer(ctx context.Context, id string) (session.Session, error)
	// Declared returns the capabilities the adapter declares.
	Declared() session.Capabilities
}

// RawWriter is implemented by harnesses whose backend can hold a record the
// adapter itself would refuse to write, for the corrupt-record clause. An
// AppendRaw error wrapping session.ErrUnsupported skips the clause.
type RawWriter interface {
	// AppendRaw stores raw as the next record of session id, unvalidated.
	AppendRaw(ctx context.Context, id string, raw []byte) error
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
	// clock resolution); the TTL clause uses multiples of it.
	MinTTL() time.Duration
}

// Raw is a RawWriter made of two functions, for harnesses that build one
// from parts.
type Raw struct {
	Append  func(ctx context.Context, id string, raw []byte) error
	Reports func(id string) []driver.CorruptRecord
}

// AppendRaw calls r.Append.
func (r Raw) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return r.Append(ctx, id, raw)
}

// CorruptReports calls r.Reports.
func (r Raw) CorruptReports(id string) []driver.CorruptRecord { return r.Reports(id) }
