package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
)

// DefaultWaitTimeout is how long a write waits for its replica
// acknowledgements when Options.WaitReplicas is set and
// Options.WaitTimeout is zero.
const DefaultWaitTimeout = time.Second

// ReplicaError reports a write that the primary made but that fewer
// replicas than Options.WaitReplicas acknowledged within
// Options.WaitTimeout (or whose WAIT failed): the write happened, and a
// failover may lose it. It wraps session.ErrOutcomeUnknown.
type ReplicaError struct {
	Acked   int           // replicas that acknowledged the write
	Wanted  int           // Options.WaitReplicas
	Timeout time.Duration // Options.WaitTimeout
	Err     error         // WAIT's own failure, if it failed
}

func (e *ReplicaError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("written on the primary, but WAIT for %d replicas failed: %v: %v", e.Wanted, e.Err, session.ErrOutcomeUnknown)
	}
	return fmt.Sprintf("written on the primary, but acknowledged by %d of %d replicas within %v (a failover may lose it): %v",
		e.Acked, e.Wanted, e.Timeout, session.ErrOutcomeUnknown)
}

// Unwrap returns session.ErrOutcomeUnknown and WAIT's failure, if any.
func (e *ReplicaError) Unwrap() []error {
	if e.Err != nil {
		return []error{session.ErrOutcomeUnknown, e.Err}
	}
	return []error{session.ErrOutcomeUnknown}
}

// processor sends commands: the Store's client, or one of its connections
// (a *goredis.Conn, see Store.write).
type processor interface {
	Process(ctx context.Context, cmd goredis.Cmder) error
	TxPipelined(ctx context.Context, fn func(goredis.Pipeliner) error) ([]goredis.Cmder, error)
}

// write runs fn, the commands of one write of key's session, and, when
// Options.WaitReplicas is set and fn reports that it wrote, WAIT
// numreplicas timeout on the same connection: WAIT covers the writes of
// the connection it is sent on, so fn then runs on one connection taken
// from the client (from the key's primary in a cluster), not on the pool.
// A WAIT that falls short (or fails) gives a *ReplicaError; an error of
// fn is classified by sent: it wraps session.ErrOutcomeUnknown unless the
// write provably did not happen.
func (st *Store) write(ctx context.Context, key string, fn func(p processor) (wrote bool, err error)) error {
	if st.opts.WaitReplicas <= 0 {
		_, err := fn(st.client)
		return sent(err)
	}
	var c *goredis.Client
	switch cl := st.client.(type) {
	case *goredis.Client:
		c = cl
	case *goredis.ClusterClient:
		var err error
		if c, err = cl.MasterForKey(ctx, key); err != nil {
			return err
		}
	default: // New refuses WaitReplicas on other clients
		return fmt.Errorf("%w: WaitReplicas on a %T", ErrInvalidOptions, st.client)
	}
	conn := c.Conn()
	defer conn.Close()
	wrote, err := fn(conn)
	if err != nil || !wrote {
		return sent(err)
	}
	n, err := conn.Wait(ctx, st.opts.WaitReplicas, st.opts.WaitTimeout).Result()
	if err != nil || int(n) < st.opts.WaitReplicas {
		return &ReplicaError{Acked: int(n), Wanted: st.opts.WaitReplicas, Timeout: st.opts.WaitTimeout, Err: err}
	}
	return nil
}
