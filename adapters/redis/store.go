package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

	heldCap     int          // Options.HeldConns, normalised
	held        heldConns    // the connections held for back-to-back commits
	heldCommits atomic.Int64 // commits that landed on a held connection
	heldResends atomic.Int64 // held commits settled by a resend (see resend)

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
	return &Store{client: client, opts: opts, ttlMS: opts.ttlMillis(), heldCap: heldCap(client, opts.HeldConns)}, nil
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
	s := &Session{st: st, id: id, keys: keys, all: all}
	s.pops = s.popIndexKey()
	return s, nil
}

// RemoveSession deletes every key of session id, its checkpoint hash and
// its pop records included, in one DEL: what Clear leaves (the
// checkpoints, the pop records) goes too, and the items the records hold
// with it. The records are read from the session's pop record index (see
// "Lost replies" in the package documentation), at a cost that follows
// the records of the last PopRecordTTL, never the keyspace: WATCH of the
// index, ZRANGE, then MULTI, DEL of every key of the session and of every
// record the index names, EXEC, on one connection to the session's
// primary (three round trips), again when a pop changed the index in
// between (EXEC then deleted nothing). Every key the DEL deletes is named
// in it, in the session's hash slot in the native layout. It is for
// sessions that must leave no trace, such as sessionctl check's probes.
// An error before the EXEC was sent means nothing was deleted; a lost
// reply of the EXEC is an error wrapping session.ErrOutcomeUnknown (the
// DEL may have run); calling again is safe. A RecoverPop after it writes
// a record again (the token is settled: it pops nothing), which expires
// after PopRecordTTL.
func (st *Store) RemoveSession(ctx context.Context, id string) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	wctx := context.WithoutCancel(ctx)
	// On a cluster, the session's primary: go-redis's ClusterClient.Watch
	// would run it all again after a lost reply of the WATCH.
	var w interface {
		Watch(context.Context, func(*goredis.Tx) error, ...string) error
	} = st.client
	if cc, ok := st.client.(*goredis.ClusterClient); ok {
		m, err := cc.MasterForKey(wctx, s.pops)
		if err != nil {
			return fmt.Errorf("redis: remove session %q: %w", id, err)
		}
		w = m
	}
	for range maxRemoveAttempts {
		sentDel := false
		err := w.Watch(wctx, func(tx *goredis.Tx) error {
			recs, err := tx.ZRange(wctx, s.pops, 0, -1).Result()
			if err != nil && !goredis.HasErrorPrefix(err, "WRONGTYPE") {
				return err
			}
			del := goredis.NewIntCmd(wctx, delArgs(s.removeKeys(recs))...)
			del.SetFirstKeyPos(1)
			sentDel = true
			_, err = tx.TxPipelined(wctx, func(p goredis.Pipeliner) error {
				return p.Process(wctx, onceInt{del})
			})
			return txSent(err, del)
		}, s.pops)
		switch {
		case errors.Is(err, goredis.TxFailedErr):
			continue // a pop changed the index: nothing was deleted
		case err != nil && !sentDel: // WATCH or ZRANGE: nothing was written
			return fmt.Errorf("redis: remove session %q: %w", id, err)
		case err != nil:
			return fmt.Errorf("redis: remove session %q: %w", id, sent(err))
		}
		return nil
	}
	return fmt.Errorf("redis: remove session %q: its pop record index changed %d times in a row", id, maxRemoveAttempts)
}

// maxRemoveAttempts bounds how often RemoveSession starts again when pops
// change the session's pop record index between its read and its DEL.
const maxRemoveAttempts = 100

// removeKeys returns every key of the session, its pop record index
// included, and the members of the index, recs, that are the session's
// pop record keys (a member that is not one, which this package never
// writes, is left alone).
func (s *Session) removeKeys(recs []string) []string {
	keys := append(s.all[:len(s.all):len(s.all)], s.pops)
	base, tail := s.popRecordParts()
	pre := base + popRecordPart
	for _, k := range recs {
		if len(k) == len(pre)+popTokenLen+len(tail) && strings.HasPrefix(k, pre) && strings.HasSuffix(k, tail) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Close makes every later call on the Store and its Sessions return
// session.ErrClosed. It closes the client only if the Store opened it
// (Open); an injected client stays open. Close is idempotent.
func (st *Store) Close() error {
	st.closeOnce.Do(func() {
		st.closed.Store(true)
		st.releaseHeld()
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
