package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Group commit.
//
// Every write of a Store (AddItems, PopItem, Clear, ReplaceItems, and the
// schema creation of Open) is a request to one writer goroutine, which owns
// the Store's write connection. When the writer becomes free it takes every
// request queued at that moment (up to maxGroup), begins one transaction
// with BEGIN IMMEDIATE, runs each request inside a SAVEPOINT of its own,
// and commits once; each caller is answered after that commit. So:
//
//   - writers of one process never contend for SQLite's lock, and never
//     see SQLITE_BUSY: they queue in Go;
//   - N concurrent writes cost one commit (one fsync at synchronous=FULL)
//     instead of N;
//   - a request that fails rolls back to its own savepoint and fails alone;
//     the others of its group commit;
//   - a lone request runs without a savepoint and without waiting for
//     company: the writer never waits on a timer, so one writer's latency
//     is one transaction's.
//
// Only the lock between processes (or between Stores on one file) is
// waited for, by BEGIN IMMEDIATE, for up to Options.BusyTimeout.

// maxGroup bounds the requests of one group transaction, so that the
// first caller of a long queue is not kept waiting for all of it.
const maxGroup = 128

// errRedo, returned by a request's function, asks the writer to undo what
// the function did (roll back to its savepoint, or the transaction) and
// call it again with redo set. PopItem uses it when the newest row it
// deleted turns out unreadable: that row must stay.
var errRedo = errors.New("sqlite: redo")

// ErrReadOnly reports a write on a Store opened with Options.ReadOnly.
var ErrReadOnly = errors.New("sqlite: store opened read-only")

// wconn is a write connection with the statements prepared on it, held
// for as long as the connection is.
type wconn struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

// maxCachedInsert is the largest multi-row INSERT whose prepared
// statement a connection keeps; longer batches prepare theirs per call.
const maxCachedInsert = 64

// exec runs query with args through the statement prepared for it.
func (w *wconn) exec(ctx context.Context, query string, args ...any) error {
	s, err := w.stmt(ctx, query)
	if err != nil {
		return err
	}
	_, err = s.ExecContext(ctx, args...)
	return err
}

// stmt returns the statement prepared for query on w, preparing it once.
func (w *wconn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := w.stmts[query]; ok {
		return s, nil
	}
	s, err := w.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if w.stmts == nil {
		w.stmts = make(map[string]*sql.Stmt)
	}
	w.stmts[query] = s
	return s, nil
}

// execOnce runs query without keeping its statement.
func (w *wconn) execOnce(ctx context.Context, query string, args ...any) error {
	_, err := w.c.ExecContext(ctx, query, args...)
	return err
}

func (w *wconn) close() {
	for _, s := range w.stmts {
		_ = s.Close()
	}
	_ = w.c.Close()
}

// request is one write waiting for, or done by, the writer.
type request struct {
	ctx  context.Context
	fn   func(ctx context.Context, w *wconn, redo bool) error
	done chan error // receives the outcome once, after the commit

	state   reqState  // guarded by Store.wmu
	started time.Time // first attempt, for BusyTimeout of busy retries
	err     error     // outcome of the current round (writer only)
	ok      bool      // ran without error in the current round (writer only)
	again   bool      // to be run in the next round (writer only)
}

type reqState uint8

const (
	queued    reqState = iota // in Store.queue, may be withdrawn
	claimed                   // taken by the writer: the caller waits for done
	withdrawn                 // its caller gave up before it was claimed
)

// writerState is the group-commit machinery of a writable Store.
type writerState struct {
	wmu         sync.Mutex
	queue       []*request
	stopping    bool               // no new requests; the writer exits
	beginCancel context.CancelFunc // set while the writer waits for the lock
	wake        chan struct{}      // cap 1: the queue may be non-empty
	done        chan struct{}      // closed when the writer exited
	bg          context.Context    // the writer's statements' context
	bgCancel    context.CancelFunc // ends a wait for the lock at Close
	hold        bool               // keep one connection for the Store's lifetime
	wc          *wconn             // the held connection (writer goroutine only)

	groups, batches atomic.Int64 // transactions committed, requests in them
}

// startWriter starts the writer goroutine.
func (st *Store) startWriter(hold bool) {
	w := &st.w
	w.wake = make(chan struct{}, 1)
	w.done = make(chan struct{})
	w.bg, w.bgCancel = context.WithCancel(context.Background())
	w.hold = hold
	go st.writeLoop()
}

// stopWriter makes later writes fail with ErrClosed, fails the queued ones
// and waits for the group in progress.
func (st *Store) stopWriter() {
	w := &st.w
	if w.done == nil {
		return
	}
	w.wmu.Lock()
	w.stopping = true
	if w.beginCancel != nil {
		w.beginCancel()
	}
	w.wmu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
	w.bgCancel()
}

// submit hands fn to the writer and waits for its outcome. If ctx ends
// before the writer took the request, the request is withdrawn (it will
// never run) and ctx's error returned; once taken, the caller waits for
// the commit, so that an error always means nothing was written.
func (st *Store) submit(ctx context.Context, fn func(ctx context.Context, w *wconn, redo bool) error) error {
	if st.opts.ReadOnly {
		return ErrReadOnly
	}
	w := &st.w
	r := &request{ctx: ctx, fn: fn, done: make(chan error, 1)}
	w.wmu.Lock()
	if w.stopping {
		w.wmu.Unlock()
		return session.ErrClosed
	}
	w.queue = append(w.queue, r)
	w.wmu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if st.withdraw(r) {
			return ctx.Err()
		}
		return <-r.done
	}
}

// withdraw removes r from the queue if the writer has not taken it yet.
func (st *Store) withdraw(r *request) bool {
	w := &st.w
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if r.state != queued {
		return false
	}
	r.state = withdrawn
	for i, q := range w.queue {
		if q == r {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			break
		}
	}
	if len(w.queue) == 0 && w.beginCancel != nil {
		w.beginCancel() // nobody left to wait for the lock for
	}
	return true
}

// claim takes up to maxGroup queued requests.
func (st *Store) claim() []*request {
	w := &st.w
	w.wmu.Lock()
	defer w.wmu.Unlock()
	n := min(len(w.queue), maxGroup)
	out := make([]*request, n)
	copy(out, w.queue[:n])
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	for _, r := range out {
		r.state = claimed
	}
	return out
}

func (st *Store) writeLoop() {
	w := &st.w
	defer close(w.done)
	defer func() {
		if w.wc != nil {
			w.wc.close()
			w.wc = nil
		}
	}()
	for {
		w.wmu.Lock()
		for len(w.queue) == 0 && !w.stopping {
			w.wmu.Unlock()
			<-w.wake
			w.wmu.Lock()
		}
		stopping := w.stopping
		w.wmu.Unlock()
		if stopping {
			for _, r := range st.claim() {
				r.done <- session.ErrClosed
			}
			w.wmu.Lock()
			empty := len(w.queue) == 0
			w.wmu.Unlock()
			if empty {
				return
			}
			continue
		}
		st.runGroup()
	}
}

// conn returns the connection to write with: the held one, or one from the
// pool for this group (a private in-memory database has only one, which
// reads need too).
func (st *Store) conn(ctx context.Context) (*wconn, error) {
	w := &st.w
	if w.wc != nil {
		return w.wc, nil
	}
	c, err := st.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	wc := &wconn{c: c}
	if st.syncPragma != "" {
		// OpenDB: the caller's connections know nothing of Synchronous;
		// every write goes through this connection, so this is enough.
		if err := wc.execOnce(ctx, st.syncPragma); err != nil {
			wc.close()
			return nil, err
		}
	}
	if w.hold {
		w.wc = wc
	}
	return wc, nil
}

// release gives back a connection taken for one group, or drops a held
// one that went bad (a transaction may still be open on it). A private
// in-memory database cannot lose its only connection: the Store stops
// taking calls instead (they fail with ErrClosed; Close still closes it).
func (st *Store) release(wc *wconn, bad bool) {
	w := &st.w
	if bad {
		if st.memory {
			st.closed.Store(true)
		} else {
			_ = wc.c.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	if w.wc == wc && !bad {
		return
	}
	if w.wc == wc {
		w.wc = nil
	}
	wc.close()
}

// begin waits for the database's write lock, for up to BusyTimeout since
// start, while any request is still queued for it.
func (st *Store) begin(start time.Time) (*wconn, error) {
	w := &st.w
	backoff := time.Millisecond
	for {
		ctx, cancel := context.WithCancel(w.bg)
		w.wmu.Lock()
		if len(w.queue) == 0 || w.stopping {
			w.wmu.Unlock()
			cancel()
			return nil, errNobody
		}
		w.beginCancel = cancel
		w.wmu.Unlock()
		wc, err := st.conn(ctx)
		if err == nil {
			if err = wc.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
				st.release(wc, false)
			}
		}
		w.wmu.Lock()
		w.beginCancel = nil
		w.wmu.Unlock()
		cancelled := ctx.Err() != nil
		cancel()
		if err == nil {
			return wc, nil
		}
		if cancelled {
			return nil, errNobody // every caller withdrew, or Close
		}
		if !isBusy(err) || time.Since(start)+backoff > st.opts.BusyTimeout {
			return nil, err
		}
		// SQLite's busy handler (busy_timeout) already waited, unless the
		// caller's *sql.DB has none: back off, with jitter.
		sleep := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-w.bg.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// errNobody ends a wait for the lock that no request needs any more.
var errNobody = errors.New("sqlite: no request left")

// runGroup runs what is queued as one or more group transactions.
func (st *Store) runGroup() {
	w := &st.w
	start := time.Now()
	wc, err := st.begin(start)
	if err != nil {
		if errors.Is(err, errNobody) {
			w.wmu.Lock()
			stopping := w.stopping
			w.wmu.Unlock()
			if !stopping {
				return
			}
			err = session.ErrClosed
		}
		for _, r := range st.claim() {
			r.done <- err
		}
		return
	}
	reqs := st.claim()
	for _, r := range reqs {
		r.started = start
	}
	for {
		reqs = st.round(wc, reqs)
		if len(reqs) == 0 {
			return
		}
		// Some requests must run again (a busy statement, or a
		// transaction SQLite rolled back on its own): a new transaction.
		wc, err = st.beginAgain(start)
		if err != nil {
			for _, r := range reqs {
				r.done <- err
			}
			return
		}
	}
}

// beginAgain begins a transaction for requests already claimed.
func (st *Store) beginAgain(start time.Time) (*wconn, error) {
	backoff := time.Millisecond
	for {
		wc, err := st.conn(st.w.bg)
		if err == nil {
			if err = wc.exec(st.w.bg, "BEGIN IMMEDIATE"); err == nil {
				return wc, nil
			}
			st.release(wc, false)
		}
		if !isBusy(err) || time.Since(start)+backoff > st.opts.BusyTimeout || st.w.bg.Err() != nil {
			return nil, err
		}
		time.Sleep(backoff/2 + rand.N(backoff/2+1))
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// round runs reqs in the transaction open on wc and ends it: it commits,
// answers every request that is done, and returns those to run again.
func (st *Store) round(wc *wconn, reqs []*request) (again []*request) {
	ctx := st.w.bg
	single := len(reqs) == 1
	lost := false // no transaction to commit: SQLite rolled it back, or redo could not begin
	for _, r := range reqs {
		r.ok, r.again, r.err = false, false, nil
		if lost {
			r.again = true
			continue
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err // gave up while queued: never written
			continue
		}
		if single {
			// Alone: no savepoint. Undo is the transaction's rollback.
			err := r.fn(ctx, wc, false)
			if errors.Is(err, errRedo) {
				if err = wc.exec(ctx, "ROLLBACK"); err == nil {
					if err = wc.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
						lost = true
					} else {
						err = r.fn(ctx, wc, true)
					}
				}
			}
			r.err, r.ok = err, err == nil
			break
		}
		if err := wc.exec(ctx, "SAVEPOINT g"); err != nil {
			r.err, lost = err, true
			continue
		}
		err := r.fn(ctx, wc, false)
		if errors.Is(err, errRedo) {
			if err = wc.exec(ctx, "ROLLBACK TO g"); err == nil {
				err = r.fn(ctx, wc, true)
			}
		}
		if err == nil {
			if err = wc.exec(ctx, "RELEASE g"); err == nil {
				r.ok = true
				continue
			}
		}
		r.err = err
		// Undo this request alone. If that fails, SQLite already rolled
		// the whole transaction back (some errors do): the others run
		// again in a new one.
		if wc.exec(ctx, "ROLLBACK TO g") != nil || wc.exec(ctx, "RELEASE g") != nil {
			lost = true
		}
	}

	committed := false
	anyOK := false
	for _, r := range reqs {
		anyOK = anyOK || r.ok
	}
	if !lost && anyOK {
		err := wc.exec(context.WithoutCancel(ctx), "COMMIT")
		if err == nil {
			committed = true
			st.release(wc, false)
			st.w.groups.Add(1)
		} else {
			// Nothing was written: those that ran get the commit's error.
			st.release(wc, !st.rollbackW(wc))
			for _, r := range reqs {
				if r.ok {
					r.ok, r.err = false, err
				}
			}
		}
	} else {
		st.release(wc, !st.rollbackW(wc))
	}
	for _, r := range reqs {
		switch {
		case r.again:
			again = append(again, r)
		case r.ok && committed:
			st.w.batches.Add(1)
			r.done <- nil
		case r.ok:
			// Rolled back with a transaction another request lost.
			r.ok, r.again = false, true
			again = append(again, r)
		default:
			if res := st.retryOrFail(r, r.err, &again); !r.again {
				r.done <- res
			}
		}
	}
	return again
}

// rollbackW ends the transaction on wc, reporting whether wc is usable.
func (st *Store) rollbackW(wc *wconn) bool {
	err := wc.execOnce(context.WithoutCancel(st.w.bg), "ROLLBACK")
	return err == nil || isNoTransaction(err)
}

// write runs fn in the Store's next group transaction, with the SQL
// connection of the group. op names the operation in errors.
func (st *Store) write(ctx context.Context, op string, fn func(ctx context.Context, c *sql.Conn) error) error {
	return st.writeW(ctx, op, func(ctx context.Context, w *wconn, _ bool) error { return fn(ctx, w.c) })
}

// writeW is write with the prepared-statement connection and redo flag.
func (st *Store) writeW(ctx context.Context, op string, fn func(ctx context.Context, w *wconn, redo bool) error) error {
	if err := st.check(ctx); err != nil {
		return err
	}
	return st.wrap(ctx, op, st.submit(ctx, fn))
}

// Stats reports the Store's group commit so far: the write transactions
// committed and the writes (AddItems, PopItem, ...) they carried. Writes
// per transaction above 1 is concurrency the Store turned into fewer
// commits.
func (st *Store) Stats() (transactions, writes int64) {
	return st.w.groups.Load(), st.w.batches.Load()
}

// retryOrFail decides the fate of a request that failed with err before
// any commit: a busy statement runs again while BusyTimeout allows (r.again
// set, r appended to again); anything else is its answer.
func (st *Store) retryOrFail(r *request, err error, again *[]*request) error {
	if isBusy(err) && time.Since(r.started) < st.opts.BusyTimeout && r.ctx.Err() == nil {
		r.again = true
		*again = append(*again, r)
		return nil
	}
	return err
}
