package redis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Store keeps sessions in one Redis deployment (standalone, sentinel or
// cluster) through a go-redis UniversalClient. It is safe for concurrent
// use; Sessions are cheap handles on it.
type Store struct {
	client goredis.UniversalClient
	owned  bool // opened by Open: closed by Close
	opts   Options
	ttlMS  int64
	push   pusher // coalesces concurrent appends into pipelines

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// New returns a Store on client. The client stays the caller's: Close does
// not close it. LayoutPython is refused on a cluster client (a
// *goredis.ClusterClient, which also covers failover cluster clients, or a
// *goredis.Ring) with an error wrapping ErrClusterLayout.
func New(client goredis.UniversalClient, opts Options) (*Store, error) {
	routeGoRedisLog()
	if client == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	opts, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	if opts.Layout == LayoutPython && isSharded(client) {
		return nil, ErrClusterLayout
	}
	switch client.(type) {
	case *goredis.Client, *goredis.ClusterClient:
	default:
		if opts.WaitReplicas > 0 {
			return nil, fmt.Errorf("%w: WaitReplicas needs a *goredis.Client or *goredis.ClusterClient, not a %T", ErrInvalidOptions, client)
		}
	}
	return &Store{client: client, opts: opts, ttlMS: opts.ttlMillis()}, nil
}

// isSharded reports whether client spreads keys over several servers.
func isSharded(client goredis.UniversalClient) bool {
	switch client.(type) {
	case *goredis.ClusterClient, *goredis.Ring:
		return true
	}
	return false
}

// Client returns the Store's client.
func (st *Store) Client() goredis.UniversalClient { return st.client }

// Options returns the Store's options, defaults filled in.
func (st *Store) Options() Options { return st.opts }

// Session returns a handle on session id. It fails with an error wrapping
// session.ErrInvalidSessionID for the empty id (and, in the Python layout,
// for an id ending in ":messages" or ":counter", whose hash key would be
// another session's key), and with session.ErrClosed after Close.
func (st *Store) Session(id string) (*Session, error) {
	if err := driver.ValidateID(id); err != nil {
		return nil, err
	}
	if st.closed.Load() {
		return nil, session.ErrClosed
	}
	var keys []string
	var ckey string
	if st.opts.Layout == LayoutPython {
		var err error
		if keys, err = pythonKeys(st.opts.KeyPrefix, id); err != nil {
			return nil, err
		}
		ckey = pythonCheckpointKey(keys[1])
	} else {
		keys = nativeKeys(st.opts.KeyPrefix, id)
		ckey = nativeCheckpointKey(st.opts.KeyPrefix, id)
	}
	all := append(keys[:len(keys):len(keys)], ckey)
	return &Session{st: st, id: id, keys: keys, all: all}, nil
}

// RemoveSession deletes every key of session id, its checkpoint hash
// included, in one DEL: what Clear leaves (the checkpoints) goes too. It is
// for sessions that must leave no trace, such as sessionctl check's probes.
// A lost reply is an error wrapping session.ErrOutcomeUnknown (the DEL may
// have run); calling again is safe.
func (st *Store) RemoveSession(ctx context.Context, id string) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	if err := sendOnce(context.WithoutCancel(ctx), st.client, delArgs(s.all)...).Err(); err != nil {
		return fmt.Errorf("redis: remove session %q: %w", id, sent(err))
	}
	return nil
}

// Close makes every later call on the Store and its Sessions return
// session.ErrClosed. It closes the client only if the Store opened it
// (Open); an injected client stays open. Close is idempotent.
func (st *Store) Close() error {
	st.closeOnce.Do(func() {
		st.closed.Store(true)
		if st.owned {
			st.closeErr = st.client.Close()
		}
	})
	return st.closeErr
}

// Ping checks that the server answers.
func (st *Store) Ping(ctx context.Context) error {
	if st.closed.Load() {
		return session.ErrClosed
	}
	if err := st.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: ping: %w", err)
	}
	return nil
}
