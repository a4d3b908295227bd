package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Store is one PostgreSQL database (one pair of tables) holding many
// sessions. It is safe for concurrent use, and any number of Stores, in one
// process or in many, may share the tables. A write's error wraps
// session.ErrOutcomeUnknown when its commit had been sent and no answer
// came (the write may have landed); any other error of a write means
// nothing was written (see the package documentation, Outcome unknown).
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // Open made pool, so Close closes it
	opts   Options
	q      *queries
	closed atomic.Bool
	// ckReady: the checkpoints table is known to exist (checkpoints.go).
	ckReady atomic.Bool
	// opsExist: the operation-id table is known to exist (once.go).
	opsExist atomic.Bool
	// noFastPop: the server's encoding is not UTF-8, so text may hold
	// bytes Go's validator refuses and PostgreSQL's JSON parser accepts;
	// every pop takes the transaction that checks rows in Go first.
	noFastPop bool
}

var _ driver.RawAppender = (*Store)(nil)

// Open connects to the database dsn names and returns a Store that owns
// the connection pool: Close closes it. dsn is anything pgxpool.ParseConfig
// takes: a postgres:// or postgresql:// URL, or key=value pairs, with pgx's
// and pgxpool's own options (pool_max_conns, sslmode, ...). Unless
// opts.SkipCreateTables is set, the tables and indexes are created if
// missing.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx masks the password in its parse errors.
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	st, err := newStore(ctx, pool, true, o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return st, nil
}

// OpenPool returns a Store on a pool the caller made. The pool stays the
// caller's: Close does not close it.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", ErrInvalidOptions)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return newStore(ctx, pool, false, o)
}

func newStore(ctx context.Context, pool *pgxpool.Pool, owned bool, o Options) (*Store, error) {
	st := &Store{pool: pool, owned: owned, opts: o, q: newQueries(o)}
	var enc string
	if err := pool.QueryRow(ctx, `SHOW server_encoding`).Scan(&enc); err != nil {
		return nil, st.wrap(ctx, "open", err)
	}
	st.noFastPop = enc != "UTF8"
	if err := st.ensureSchema(ctx, o.SkipCreateTables); err != nil {
		return nil, err
	}
	return st, nil
}

// Pool returns the Store's connection pool, for queries of your own. Do
// not close it; Close does, when Open made it.
func (st *Store) Pool() *pgxpool.Pool { return st.pool }

// Declared returns the optional capabilities of the Store's sessions:
// latest-N reads, atomic and conditional replace, checkpoints, appends
// committed with a checkpoint, following and appends at most once. There is no TTL: PostgreSQL has no expiry of its own, and a
// TTL that some sweeper might or might not apply would be a promise this
// package could not keep.
func (st *Store) Declared() session.Capabilities {
	return session.Caps(session.CapLatest, session.CapReplace, session.CapVersionedReplace, session.CapCheckpoints, session.CapCheckpointCommit,
		session.CapFollow, session.CapAppendOnce)
}

// Close makes every later call on the Store and its sessions fail with
// session.ErrClosed, and closes the pool if Open made it (waiting for the
// calls in progress to release their connections). Close is idempotent.
func (st *Store) Close() error {
	if st.closed.Swap(true) || !st.owned {
		return nil
	}
	st.pool.Close()
	return nil
}

// Session returns a handle on session id. Any non-empty string is a valid
// id: it only reaches SQL as a bound parameter, and an id PostgreSQL's
// text cannot hold (a NUL byte, invalid UTF-8) is stored in an escaped form
// of its own (see the package documentation). Handles are cheap and safe
// for concurrent use, and two handles on one id see one history.
func (st *Store) Session(id string) (*Session, error) {
	if err := driver.ValidateID(id); err != nil {
		return nil, err
	}
	if st.closed.Load() {
		return nil, session.ErrClosed
	}
	return &Session{st: st, id: id, sid: storedID(id)}, nil
}

// ListSessions returns the ids of the sessions holding at least one row
// or checkpoint, sorted by their stored form.
func (st *Store) ListSessions(ctx context.Context) ([]string, error) {
	if err := st.check(ctx); err != nil {
		return nil, err
	}
	q := st.q.list
	if ok, err := st.checkpointsReady(ctx, false); err != nil {
		return nil, st.wrap(ctx, "list sessions", err)
	} else if ok {
		q = st.q.listCk
	}
	rows, err := st.pool.Query(ctx, q)
	if err != nil {
		return nil, st.wrap(ctx, "list sessions", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, st.wrap(ctx, "list sessions", err)
		}
		ids = append(ids, sessionID(s))
	}
	if err := rows.Err(); err != nil {
		return nil, st.wrap(ctx, "list sessions", err)
	}
	return ids, nil
}

// AppendRaw stores raw, unvalidated, as the next row of session id, so
// that a test can leave what a foreign writer or a damaged table would
// (driver.RawAppender). Production code never calls it. raw must be text
// PostgreSQL accepts (valid UTF-8, no NUL byte).
func (st *Store) AppendRaw(ctx context.Context, id string, raw []byte) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	if err := st.check(ctx); err != nil {
		return err
	}
	return s.write(ctx, "append raw", func(b *batch) {
		b.queue(st.q.lockKey, s.sid)
		b.queue(st.q.lockSession, s.sid)
		b.queue(st.q.upsertSession, s.sid)
		b.queue(st.q.insertOne, s.sid, string(raw))
	})
}

// check returns the error a call must fail with before doing anything: the
// context's, or ErrClosed.
func (st *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st.closed.Load() {
		return session.ErrClosed
	}
	return nil
}

// wrap turns err from operation op into the error a caller sees: the
// context's error when ctx ended (pgx reports an interrupted call in its
// own words), ErrClosed after Close; session.ErrOutcomeUnknown stays
// wrapped.
func (st *Store) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var cause error
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		cause = cerr
	} else if st.closed.Load() && !errors.Is(err, session.ErrClosed) {
		cause = session.ErrClosed
	}
	switch {
	case cause == nil:
		return fmt.Errorf("postgres: %s: %w", op, err)
	case errors.Is(err, session.ErrOutcomeUnknown):
		return fmt.Errorf("postgres: %s: %w: %w (%v)", op, session.ErrOutcomeUnknown, cause, err)
	}
	return fmt.Errorf("postgres: %s: %w (%v)", op, cause, err)
}
