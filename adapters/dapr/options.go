package dapr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	daprc "github.com/dapr/go-sdk/client"

	"github.com/agentsessions/sessions/session/driver"
)

// Consistency is the Dapr consistency level of every state operation: the
// "consistency" state metadata of reads and the consistency of the state
// options of writes, as the Python SDK's DaprSession sends them.
type Consistency string

// The consistency levels, spelled as Python's DAPR_CONSISTENCY_EVENTUAL and
// DAPR_CONSISTENCY_STRONG.
const (
	ConsistencyEventual Consistency = "eventual"
	ConsistencyStrong   Consistency = "strong"
)

// DefaultMaxAttempts is how many times a write is tried when its ETag is
// stale, as Python's _MAX_WRITE_ATTEMPTS.
const DefaultMaxAttempts = 5

// Options configures a Store. The zero value but StoreName is Python's
// default: eventual consistency, no TTL, five attempts.
type Options struct {
	// StoreName is the name of the Dapr state store component. Required.
	StoreName string
	// TTL, when positive, is sent as the "ttlInSeconds" state metadata of
	// every write, whole seconds (at least one); stores without TTL support
	// ignore or refuse it, as they do for Python.
	TTL time.Duration
	// Consistency is ConsistencyEventual (the default when empty) or
	// ConsistencyStrong.
	Consistency Consistency
	// MaxAttempts bounds the tries of one write whose ETag turns out stale
	// (a concurrent writer changed the session in between); zero means
	// DefaultMaxAttempts. The wait before try n is 50 ms·2^(n-2), at most
	// 1 s, plus up to 10% jitter. When every try conflicts the write fails
	// with ErrConflict and nothing of it was written.
	MaxAttempts int
	// OnCorrupt receives a report for every stored record that is not a JSON
	// object, and for a stored history that is not a JSON array. Nil means
	// driver.LogCorrupt(Logger).
	OnCorrupt driver.CorruptHandler
	// Logger receives the warning of a metadata write that failed after
	// the items were committed (the append is reported as done, as in
	// Python). Nil means slog.Default().
	Logger *slog.Logger
}

// StateClient is the part of the Dapr client (github.com/dapr/go-sdk/client.Client)
// a Store uses.
type StateClient interface {
	GetStateWithConsistency(ctx context.Context, storeName, key string, meta map[string]string, sc daprc.StateConsistency) (*daprc.StateItem, error)
	SaveBulkState(ctx context.Context, storeName string, items ...*daprc.SetStateItem) error
	DeleteStateWithETag(ctx context.Context, storeName, key string, etag *daprc.ETag, meta map[string]string, opts *daprc.StateOptions) error
}

// Errors reported by this package, checked with errors.Is.
var (
	// ErrConflict reports a write that found the session changed by
	// another writer on each of its MaxAttempts tries; nothing of it was
	// written. Python's DaprSession raises the last conflict error then.
	ErrConflict = errors.New("dapr: concurrent writers kept changing the session")
	// ErrInvalidOptions reports Options New or Open cannot use.
	ErrInvalidOptions = errors.New("dapr: invalid options")
)

func (o Options) validate() (Options, error) {
	if o.StoreName == "" {
		return o, fmt.Errorf("%w: StoreName is required", ErrInvalidOptions)
	}
	switch o.Consistency {
	case "":
		o.Consistency = ConsistencyEventual
	case ConsistencyEventual, ConsistencyStrong:
	default:
		return o, fmt.Errorf("%w: Consistency %q is neither %q nor %q", ErrInvalidOptions, o.Consistency, ConsistencyEventual, ConsistencyStrong)
	}
	if o.TTL < 0 || (o.TTL > 0 && (o.TTL < time.Second || o.TTL%time.Second != 0)) {
		return o, fmt.Errorf("%w: TTL %v is not a whole number of seconds (ttlInSeconds)", ErrInvalidOptions, o.TTL)
	}
	if o.MaxAttempts < 0 {
		return o, fmt.Errorf("%w: MaxAttempts %d is negative", ErrInvalidOptions, o.MaxAttempts)
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnCorrupt == nil {
		o.OnCorrupt = driver.LogCorrupt(o.Logger)
	}
	return o, nil
}

// stateConsistency is the consistency of write options, as Python's
// _get_state_options sets it.
func (o Options) stateConsistency() daprc.StateConsistency {
	if o.Consistency == ConsistencyStrong {
		return daprc.StateConsistencyStrong
	}
	return daprc.StateConsistencyEventual
}
