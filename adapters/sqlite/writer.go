package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Group commit.
//
// Every write of a Store (AddItems, PopItem, Clear, ReplaceItems, the
// checkpoints' saves and deletes, and the schema creation of Open) is a
// request to the Store's one writer, which
// owns the Store's write connection: the caller that finds no writer
// running becomes it (leader), and runs its own request at once. When the
// writer becomes free it takes every request queued at that moment (up to
// maxGroup), begins one transaction with BEGIN IMMEDIATE, runs each request
// in turn, and commits once; each caller is answered after that commit.
// A write that may need undoing alone (PopItem) runs inside a SAVEPOINT of
// its own; the others run without one, and if one of them fails, the
// transaction is rolled back, that write fails alone and the others run
// again in a new transaction. So:
//
//   - writers of one process never contend for SQLite's lock, and never
//     see SQLITE_BUSY: they queue in Go;
//   - N concurrent writes cost one commit (one fsync at synchronous=FULL)
//     instead of N;
//   - a request that fails fails alone; the others of its group commit
//     (a checkpoint whose version check fails wrote nothing, so the group
//     goes on without rolling back; see untouchedError);
//   - a lone request runs without a savepoint and without waiting for
//     company: the writer never waits on a timer, so one writer's latency
//     is one transaction's.
//
// Only the lock between processes (or between Stores on one file) is
// waited for: BEGIN IMMEDIATE is retried, with short jittered pauses, for
// up to Options.BusyTimeout since each request was queued.

// maxGroup bounds the requests of one group transaction, so that the
// first caller of a long queue is not kept waiting for all of it.
const maxGroup = 128

// errRedo, returned by a request's function, asks the writer to undo what
// the function did (roll back to its savepoint, or the transaction) and
// call it again with redo set. PopItem uses it when the newest row it
// deleted turns out unreadable: that row must stay.
var errRedo = errors.New("sqlite: redo")

// untouchedError wraps the error of a request that failed without writing
// anything: a checkpoint whose version is not the stored one. The
// transaction is as it was before the request, so the group goes on with
// the others instead of rolling back and running them again. The answer
// (the wrapped error) stands once the group commits, since it was decided
// on what the group wrote before it; if the group rolls back instead, the
// request runs again.
type untouchedError struct{ err error }

func (e untouchedError) Error() string { return e.err.Error() }
func (e untouchedError) Unwrap() error { return e.err }

// untouched marks err, returned by a request's function that wrote
// nothing, as an untouchedError.
func untouched(err error) error { return untouchedError{err} }

// isUntouched returns the error the caller of a request sees, and whether
// the request failed without writing anything.
func isUntouched(err error) (error, bool) {
	var u untouchedError
	if errors.As(err, &u) {
		return u.err, true
	}
	return err, false
}

// ErrReadOnly reports a write on a Store opened with Options.ReadOnly.
var ErrReadOnly = errors.New("sqlite: store opened read-only")

// wconn is a write connection with the statements prepared on it, held
// for as long as the connection is.
type wconn struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
	// advanced says that the open transaction found the database an
	// AdvancedSQLiteSession store (Store.advancedNow): history writes
	// keep the class's structure rows (advanced.go).
	advanced bool
	// cookie reads PRAGMA schema_version on the driver's connection
	// (schemaVersion), prepared once.
	cookie     driver.Stmt
	cookieDest [1]driver.Value
}

// schemaVersion returns the database's schema cookie (PRAGMA
// schema_version), through a driver statement prepared once: a
// database/sql query would cost the append path some 17 allocations.
func (w *wconn) schemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := w.c.Raw(func(dc any) error {
		if w.cookie == nil {
			p, ok := dc.(driver.ConnPrepareContext)
			if !ok {
				return errors.New("the driver cannot prepare")
			}
			s, err := p.PrepareContext(ctx, "PRAGMA schema_version")
			if err != nil {
				return err
			}
			w.cookie = s
		}
		q, ok := w.cookie.(driver.StmtQueryContext)
		if !ok {
			return errors.New("the driver cannot query")
		}
		rows, err := q.QueryContext(ctx, nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := rows.Next(w.cookieDest[:]); err != nil {
			return err
		}
		n, ok := w.cookieDest[0].(int64)
		if !ok {
			return fmt.Errorf("schema_version is a %T", w.cookieDest[0])
		}
		v = n
		return nil
	})
	return v, err
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
	if w.cookie != nil {
		_ = w.c.Raw(func(any) error { return w.cookie.Close() })
	}
	_ = w.c.Close()
}

// request is one write waiting for, or done by, a leader.
type request struct {
	ctx  context.Context
	fn   func(ctx context.Context, w *wconn, redo bool) error
	done chan error // receives the outcome once, after the commit
	// undoable: fn may return errRedo, so in a group it runs inside a
	// savepoint of its own.
	undoable bool

	state   reqState  // guarded by writerState.wmu
	started time.Time // when it was queued, for BusyTimeout
	err     error     // outcome of the current round (leader only)
	ok      bool      // ran without error in the current round (leader only)
	clean   bool      // failed without writing anything in the current round (leader only)
	again   bool      // to be run in the next round (leader only)
}

type reqState uint8

const (
	queued    reqState = iota // in the queue, may be withdrawn
	claimed                   // taken by a leader: the caller waits for done
	withdrawn                 // its caller gave up before it was claimed
)

// writerState is the group-commit machinery of a writable Store. There is
// no writer goroutine while nothing is written: the caller that finds no
// leader becomes the leader and runs its own write at once (no handoff, no
// wait); callers that arrive meanwhile queue, and the leader takes them all
// in its next transaction. A leader whose own write is done hands what is
// still queued to a new goroutine and returns.
type writerState struct {
	wmu      sync.Mutex
	queue    []*request
	leading  bool          // a leader runs; guarded by wmu
	stopping bool          // no new requests; guarded by wmu
	stop     chan struct{} // closed at Close: ends waits for the lock
	leaders  sync.WaitGroup
	hold     bool   // keep one connection for the Store's lifetime
	wc       *wconn // the held connection (current leader only)
	busyMS   int64  // the held connection's busy_timeout before the writer set 0

	groups, batches atomic.Int64 // transactions committed, requests in them
	lastGroup       atomic.Int64 // requests in the last group transaction
	claimed         []*request   // claim's buffer, reused (guarded by wmu)
}

// startWriter readies the writer.
func (st *Store) startWriter(hold bool) {
	st.w.stop = make(chan struct{})
	st.w.hold = hold
}

// stopWriter makes later writes fail with ErrClosed, waits for the leader
// (which fails what is still queued with ErrClosed) and gives back the
// held connection.
func (st *Store) stopWriter() {
	w := &st.w
	if w.stop == nil {
		return
	}
	w.wmu.Lock()
	if !w.stopping {
		w.stopping = true
		close(w.stop)
	}
	w.wmu.Unlock()
	w.leaders.Wait()
	if w.wc != nil {
		// Give the connection back as it was (OpenDB: it is the caller's).
		_ = w.wc.execOnce(context.Background(), "PRAGMA busy_timeout = "+strconv.FormatInt(w.busyMS, 10))
		w.wc.close()
		w.wc = nil
	}
}

// submit runs fn in a group transaction and returns its outcome. If ctx
// ends before a leader took the request, the request is withdrawn (it will
// never run) and ctx's error returned; once taken, the caller waits for the
// commit, so that an error always means nothing was written.
func (st *Store) submit(ctx context.Context, undoable bool, fn func(ctx context.Context, w *wconn, redo bool) error) error {
	if st.opts.ReadOnly {
		return ErrReadOnly
	}
	w := &st.w
	r := &request{ctx: ctx, fn: fn, undoable: undoable, done: make(chan error, 1), started: time.Now()}
	w.wmu.Lock()
	if w.stopping {
		w.wmu.Unlock()
		return session.ErrClosed
	}
	w.queue = append(w.queue, r)
	lead := !w.leading
	if lead {
		w.leading = true
		w.leaders.Add(1)
	}
	w.wmu.Unlock()
	if lead {
		st.lead(r)
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

// withdraw removes r from the queue if no leader has taken it yet.
func (st *Store) withdraw(r *request) bool {
	w := &st.w
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if r.state != queued {
		return false
	}
	r.state = withdrawn
	w.remove(r)
	return true
}

// remove takes r out of the queue; wmu is held.
func (w *writerState) remove(r *request) {
	for i, q := range w.queue {
		if q == r {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			w.queue[len(w.queue):cap(w.queue)][0] = nil
			return
		}
	}
}

// claim takes up to maxGroup queued requests.
func (st *Store) claim() []*request {
	w := &st.w
	w.wmu.Lock()
	defer w.wmu.Unlock()
	n := min(len(w.queue), maxGroup)
	out := append(w.claimed[:0], w.queue[:n]...)
	w.claimed = out[:0]
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	for _, r := range out {
		r.state = claimed
	}
	return out
}

// lead runs group transactions while requests are queued, until mine (nil
// for a leader started by another) is answered; what is queued then goes
// to a new leader goroutine.
func (st *Store) lead(mine *request) {
	w := &st.w
	for {
		if mine == nil || w.lastGroup.Load() > 1 {
			// Writers are concurrent (this leader took over a queue, or
			// the last group carried several): the callers the last
			// commit answered are runnable and about to queue their next
			// write; let them, so that this group carries them too. A
			// yield, not a timer: with nobody runnable it returns at once,
			// and a lone writer never yields.
			runtime.Gosched()
		}
		st.runGroup(mine)
		w.wmu.Lock()
		if len(w.queue) == 0 {
			w.leading = false
			w.wmu.Unlock()
			w.leaders.Done()
			return
		}
		w.wmu.Unlock()
		if mine != nil && len(mine.done) > 0 {
			go st.lead(nil) // leadership passes on; leaders' count unchanged
			return
		}
	}
}

// conn returns the connection to write with: the held one, or one from the
// pool for this group (a private in-memory database has only one, which
// reads need too).
func (st *Store) conn() (*wconn, error) {
	w := &st.w
	if w.wc != nil {
		return w.wc, nil
	}
	ctx := context.Background()
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
		// The writer waits for other processes' locks itself, in Go,
		// where a Close or a withdrawn request can end the wait: the held
		// connection's BEGIN must fail at once when the lock is taken.
		err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&w.busyMS)
		if err == nil {
			err = wc.execOnce(ctx, "PRAGMA busy_timeout = 0")
		}
		if err != nil {
			wc.close()
			return nil, err
		}
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

// errNobody ends a wait for the lock that no request needs any more.
var errNobody = errors.New("sqlite: no request left")

// errMine ends a leader's wait for the lock when its own caller gave up.
var errMine = errors.New("sqlite: leader's caller gone")

// maxBackoff caps the pause between two tries for a lock another process
// holds: short, so that a writer polling for it often finds the gap
// between the holder's transactions.
const maxBackoff = 8 * time.Millisecond

// begin begins a write transaction for what is queued, waiting for the
// lock another process (or Store) holds. Each queued request waits at most
// BusyTimeout since it was queued, then fails with SQLite's BUSY error.
func (st *Store) begin(mine *request) (*wconn, error) {
	w := &st.w
	ctx := context.Background()
	var mineDone <-chan struct{}
	if mine != nil {
		mineDone = mine.ctx.Done()
	}
	backoff := 250 * time.Microsecond
	for {
		w.wmu.Lock()
		stopping, empty := w.stopping, len(w.queue) == 0
		mineQueued := mine != nil && mine.state == queued
		w.wmu.Unlock()
		if stopping || empty {
			return nil, errNobody
		}
		if mineQueued && mine.ctx.Err() != nil {
			return nil, errMine
		}
		wc, err := st.conn()
		if err == nil {
			if err = wc.exec(ctx, "BEGIN IMMEDIATE"); err == nil {
				return wc, nil
			}
			st.release(wc, false)
		}
		if !isBusy(err) {
			return nil, err
		}
		st.expire(err)
		sleep := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-w.stop:
			t.Stop()
		case <-mineDone:
			t.Stop()
			mineDone = nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// expire fails, with err, every queued request that waited BusyTimeout.
func (st *Store) expire(err error) {
	w := &st.w
	var late []*request
	w.wmu.Lock()
	for _, r := range w.queue {
		if time.Since(r.started) >= st.opts.BusyTimeout {
			late = append(late, r)
		}
	}
	for _, r := range late {
		r.state = claimed
		w.remove(r)
	}
	w.wmu.Unlock()
	for _, r := range late {
		r.done <- err
	}
}

// runGroup runs what is queued as one group transaction (or more, when
// some requests must run again).
func (st *Store) runGroup(mine *request) {
	wc, err := st.begin(mine)
	if err != nil {
		switch {
		case errors.Is(err, errMine):
			if st.withdraw(mine) {
				mine.done <- mine.ctx.Err()
			}
			return
		case errors.Is(err, errNobody):
			w := &st.w
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
	st.w.lastGroup.Store(int64(len(reqs)))
	for {
		reqs = st.round(wc, reqs)
		if len(reqs) == 0 {
			return
		}
		// Some requests must run again (a busy statement, or a
		// transaction SQLite rolled back on its own): a new transaction.
		wc, err = st.beginAgain(reqs)
		if err != nil {
			for _, r := range reqs {
				r.done <- err
			}
			return
		}
	}
}

// beginAgain begins a transaction for requests already claimed.
func (st *Store) beginAgain(reqs []*request) (*wconn, error) {
	ctx := context.Background()
	backoff := 250 * time.Microsecond
	for {
		wc, err := st.conn()
		if err == nil {
			if err = wc.exec(ctx, "BEGIN IMMEDIATE"); err == nil {
				return wc, nil
			}
			st.release(wc, false)
		}
		if !isBusy(err) || time.Since(reqs[0].started) > st.opts.BusyTimeout {
			return nil, err
		}
		time.Sleep(backoff/2 + rand.N(backoff/2+1))
		backoff = min(2*backoff, maxBackoff)
	}
}

// round runs reqs in the transaction open on wc and ends it: it commits,
// answers every request that is done, and returns those to run again.
// Statements run with a context that never ends: a caller's context
// interrupting one would roll the whole group back.
func (st *Store) round(wc *wconn, reqs []*request) (again []*request) {
	ctx := context.Background()
	single := len(reqs) == 1
	lost := false // no transaction to commit: SQLite rolled it back, or redo could not begin
	wc.advanced = st.advancedNow(ctx, wc)
	if wc.advanced {
		st.ensureOwnIndexes(ctx, wc)
	}
	for _, r := range reqs {
		r.ok, r.again, r.err, r.clean = false, false, nil, false
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
			err, r.clean = isUntouched(err)
			r.err, r.ok = err, err == nil
			break
		}
		if !r.undoable {
			// Optimistic: no savepoint (two statements saved per write).
			// If it fails, the whole transaction is rolled back, it fails
			// alone and the others run again in a new one.
			// A request that failed without writing anything (untouched)
			// leaves the transaction as it was: the others go on.
			err, clean := isUntouched(r.fn(ctx, wc, false))
			r.err, r.ok, r.clean = err, err == nil, clean
			lost = err != nil && !clean
			continue
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
		err, _ = isUntouched(err)
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
		err := wc.exec(ctx, "COMMIT")
		if err == nil {
			committed = true
			st.release(wc, false)
			st.w.groups.Add(1)
		} else {
			// Nothing was written: those that ran get the commit's error,
			// and so do those that failed untouched, whose answer was
			// decided on what the group wrote before them.
			st.release(wc, !st.rollbackW(wc))
			for _, r := range reqs {
				if r.ok || r.clean {
					r.ok, r.clean, r.err = false, false, err
				}
			}
		}
	} else {
		st.release(wc, !st.rollbackW(wc))
		if lost {
			// What the requests that failed untouched were decided on is
			// rolled back with the rest: they run again.
			for _, r := range reqs {
				if r.clean {
					r.clean, r.err, r.again = false, nil, true
				}
			}
		}
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
	err := wc.execOnce(context.Background(), "ROLLBACK")
	return err == nil || isNoTransaction(err)
}

// write runs fn in the Store's next group transaction, with the SQL
// connection of the group. op names the operation in errors.
func (st *Store) write(ctx context.Context, op string, fn func(ctx context.Context, c *sql.Conn) error) error {
	return st.writeW(ctx, op, false, func(ctx context.Context, w *wconn, _ bool) error { return fn(ctx, w.c) })
}

// writeW is write with the prepared-statement connection; undoable says
// that fn may return errRedo.
func (st *Store) writeW(ctx context.Context, op string, undoable bool, fn func(ctx context.Context, w *wconn, redo bool) error) error {
	if err := st.check(ctx); err != nil {
		return err
	}
	return st.wrap(ctx, op, st.submit(ctx, undoable, fn))
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
