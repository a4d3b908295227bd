package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
)

// Commits on a held connection: see "Held connections" in the package
// documentation. A Session whose checkpoint commits follow each other
// within heldIdle keeps one connection with its items list and checkpoint
// hash WATCHed since the last commit, and commits there with MULTI, RPUSH,
// HSET, EXEC: no script runs. Any change to either key since the WATCH
// makes the server refuse the EXEC, having run nothing, and the commit
// then takes the usual way (commitFenced or the commit script).

// DefaultHeldConns is the most connections a Store holds for back-to-back
// commits when Options.HeldConns is zero.
const DefaultHeldConns = 4

// heldIdle is how long a held connection waits for its session's next
// commit before it is closed.
const heldIdle = time.Second

// held is a connection a Session holds between checkpoint commits: its
// items list and checkpoint hash are WATCHed, and since the WATCH began
// the checkpoint name was at version and the list existed.
type held struct {
	conn    *goredis.Conn
	pipe    goredis.Pipeliner // conn's, for every commit
	name    string
	version int64
	length  int64       // the list's length when the WATCH began
	timer   *time.Timer // closes the connection after the idle window
	args    heldArgs
	cmds    []goredis.Cmder // a commit's commands
}

// heldArgs are the arguments of a held connection's commands, made once
// with the connection: go-redis keeps the slice a command is made with,
// and no command outlives the commit or watch that sends it.
type heldArgs struct {
	multi, exec        []any
	push               []any   // RPUSH, then each commit's items
	set                []any   // HSET of the version and document, both set by each commit
	expire             [][]any // PEXPIRE of each key, with a TTL
	watch, llen, check []any   // WATCH, LLEN of the list, HGET of the version
}

// newHeld returns s's held connection conn for the checkpoint name.
func (s *Session) newHeld(conn *goredis.Conn, name string) *held {
	list, ck, vf := s.keys[0], s.all[len(s.all)-1], "v:"+name
	h := &held{conn: conn, pipe: conn.Pipeline(), name: name, args: heldArgs{
		multi: []any{"multi"},
		exec:  []any{"exec"},
		push:  []any{"rpush", list},
		set:   []any{"hset", ck, vf, nil, "d:" + name, nil},
		watch: []any{"watch", list, ck},
		llen:  []any{"llen", list},
		check: []any{"hget", ck, vf},
	}}
	if s.st.ttlMS > 0 {
		for _, k := range s.all {
			h.args.expire = append(h.args.expire, []any{"pexpire", k, s.st.ttlMS})
		}
	}
	h.cmds = make([]goredis.Cmder, 0, 7+len(h.args.expire))
	return h
}

// holder is a Session's held connection, if any, and when its last
// commit landed; mu guards both and serialises the handle's held commits.
type holder struct {
	mu   sync.Mutex
	h    *held
	last time.Time
}

// heldConns counts a Store's held connections against its cap.
type heldConns struct {
	mu     sync.Mutex
	by     map[*Session]struct{}
	closed bool
}

// heldCap returns how many connections a Store on client may hold: want
// (Options.HeldConns), and at most a quarter of the client's pool (of
// each node's, in a cluster), so that the Store's other calls keep the
// rest; none on a Ring.
func heldCap(client goredis.UniversalClient, want int) int {
	var pool int
	switch c := client.(type) {
	case *goredis.Client:
		pool = c.Options().PoolSize
	case *goredis.ClusterClient:
		pool = c.Options().PoolSize
	}
	return max(min(want, pool/4), 0)
}

// reserve counts a held connection for s, if the cap allows.
func (hc *heldConns) reserve(s *Session, limit int) bool {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.closed || len(hc.by) >= limit {
		return false
	}
	if hc.by == nil {
		hc.by = map[*Session]struct{}{}
	}
	hc.by[s] = struct{}{}
	return true
}

// forget stops counting s's held connection.
func (hc *heldConns) forget(s *Session) {
	hc.mu.Lock()
	delete(hc.by, s)
	hc.mu.Unlock()
}

// close refuses every later reservation and returns the Sessions holding
// a connection.
func (hc *heldConns) close() []*Session {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	hc.closed = true
	out := make([]*Session, 0, len(hc.by))
	for s := range hc.by {
		out = append(out, s)
	}
	return out
}

// releaseHeld closes every held connection of the Store (Close).
func (st *Store) releaseHeld() {
	for _, s := range st.held.close() {
		s.hold.mu.Lock()
		if s.hold.h != nil {
			s.release()
		}
		s.hold.mu.Unlock()
	}
}

// mayHold reports whether a commit of items at version can use a held
// connection: the native layout's fenced commit (see commitFenced) with
// no WAIT, a version to check and, with a TTL, one well above the idle
// window (a key that expired under a WATCH would be pushed to afresh).
func (s *Session) mayHold(items []session.Item, version int64) bool {
	st := s.st
	return st.heldCap > 0 && len(items) > 0 && version >= 0 && st.opts.Layout == LayoutNative &&
		st.opts.WaitReplicas == 0 && (st.ttlMS == 0 || st.ttlMS > 10*heldIdle.Milliseconds()) &&
		s.listed.Load()
}

// commitHeld commits on the held connection, if there is one for name at
// version. done reports that the outcome is known: the commit landed
// (got), or it may have run (an error wrapping session.ErrOutcomeUnknown).
// Otherwise nothing was written and the commit must take the usual way.
// The caller holds s.hold.mu.
func (s *Session) commitHeld(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (got int64, done bool, err error) {
	h := s.hold.h
	if h == nil {
		return 0, false, nil
	}
	if !h.timer.Stop() || h.name != name || h.version != version {
		s.release() // idle too long, or the caller's version is not the one watched
		return 0, false, nil
	}
	h.fill(items, doc, version+1)
	a := &h.args
	multi, exec := goredis.NewStatusCmd(ctx, a.multi...), goredis.NewSliceCmd(ctx, a.exec...)
	watch, llen, ver := h.watchCmds(ctx)
	// The commands between MULTI and EXEC answer QUEUED, or an integer
	// if the MULTI was refused: a StatusCmd reads either, and their
	// values are not used.
	cmds := append(h.cmds[:0], onceStatus{multi},
		onceStatus{goredis.NewStatusCmd(ctx, a.push...)}, onceStatus{goredis.NewStatusCmd(ctx, a.set...)})
	for _, args := range a.expire {
		cmds = append(cmds, onceStatus{goredis.NewStatusCmd(ctx, args...)})
	}
	h.cmds = append(cmds, onceSlice{exec}, onceStatus{watch}, onceInt{llen}, onceString{ver})
	_ = h.pipe.BatchProcess(ctx, h.cmds...)
	_, _ = h.pipe.Exec(ctx)
	h.empty()
	length := h.length
	switch merr, err := multi.Err(), exec.Err(); {
	case merr != nil && answered(merr):
		// The server refused the MULTI itself (an ACL that denies it):
		// the commands after it may have run one by one. Unknown, never
		// a plain error.
		s.release()
		return 0, true, s.heldError(name, &outcomeUnknown{merr})
	case merr != nil && !notSent(merr):
		s.release()
		return s.resend(ctx, items, name, doc, version, length, merr)
	case err == goredis.Nil, answered(err), notSent(err):
		// A watched key changed (EXEC answered nil), the server refused
		// the transaction (EXECABORT: a command was refused when queued,
		// MOVED, OOM, READONLY), or nothing was sent: nothing ran.
		s.release()
		return 0, false, nil
	case err != nil:
		s.release()
		return s.resend(ctx, items, name, doc, version, length, err)
	}
	for _, v := range exec.Val() {
		if e, ok := v.(error); ok {
			// Cannot happen under the WATCH; if it does, the commands
			// before it ran.
			s.release()
			return 0, true, s.heldError(name, &outcomeUnknown{fmt.Errorf("held commit: EXEC answered %w", e)})
		}
	}
	s.st.heldCommits.Add(1)
	s.hold.last = time.Now()
	if !s.rearm(h, watch, llen, ver, version+1) {
		s.release()
	}
	return version + 1, true, nil
}

// resend settles a held commit whose reply was lost (cause: the
// connection closed, a timeout): it sends the same commit once through
// the pool, fenced as usual and also on the list's length, before, that
// the held commit was armed with. If the held commit never ran, the
// resend is the commit: any write to the watched keys makes the held
// EXEC abort should it still reach the server, so at most one of the two
// lands. If the held commit ran, the version and length moved on and the
// resend writes nothing. A resend that lands is the commit's success;
// otherwise the outcome stays unknown (the resend's own refusal does not
// tell whose write moved the version).
func (s *Session) resend(ctx context.Context, items []session.Item, name string, doc []byte, version, before int64, cause error) (int64, bool, error) {
	unknown := s.heldError(name, &outcomeUnknown{cause})
	res, err := s.commitFenced(ctx, s.st.client, items, name, doc, strconv.FormatInt(version, 10), before)
	if err != nil {
		return 0, true, unknown
	}
	if ok, got, err := casReply(res); err == nil && ok {
		s.st.heldResends.Add(1)
		return got, true, nil
	}
	return 0, true, unknown
}

// heldError is AppendWithCheckpoint's error for err.
func (s *Session) heldError(name string, err error) error {
	return fmt.Errorf("redis: save checkpoint %q of session %q: %w", name, s.id, err)
}

// fill sets h's arguments of a commit's RPUSH to items and of its HSET
// to version and doc.
func (h *held) fill(items []session.Item, doc []byte, version int64) {
	a := &h.args
	a.push = a.push[:2]
	for _, it := range items {
		a.push = append(a.push, itemArg{it})
	}
	a.set[3], a.set[5] = version, doc
}

// empty drops the caller's items and document and the commands of the
// commit just sent, so that h keeps none of them until the next.
func (h *held) empty() {
	clear(h.args.push[2:])
	h.args.set[5] = nil
	clear(h.cmds)
}

// watchCmds returns the commands that start a watch: WATCH of the items
// list and the checkpoint hash, then the list's length and the checkpoint's
// version, read under the WATCH.
func (h *held) watchCmds(ctx context.Context) (*goredis.StatusCmd, *goredis.IntCmd, *goredis.StringCmd) {
	return goredis.NewStatusCmd(ctx, h.args.watch...),
		goredis.NewIntCmd(ctx, h.args.llen...),
		goredis.NewStringCmd(ctx, h.args.check...)
}

// rearm keeps h watching at version when the WATCH began with the list
// there and the checkpoint at version, as commitFenced's fence would find
// them, and reports whether it did.
func (s *Session) rearm(h *held, watch *goredis.StatusCmd, llen *goredis.IntCmd, ver *goredis.StringCmd, version int64) bool {
	if watch.Err() != nil || llen.Err() != nil || llen.Val() == 0 || ver.Err() != nil ||
		!isDecimal(ver.Val(), version) || version >= 1e14 {
		return false
	}
	h.version, h.length = version, llen.Val()
	h.timer.Reset(heldIdle)
	return true
}

// isDecimal reports whether s is n as strconv.FormatInt(n, 10) writes it.
func isDecimal(s string, n int64) bool {
	var buf [20]byte
	return string(strconv.AppendInt(buf[:0], n, 10)) == s
}

// holdAfter starts holding a connection for s after a commit of name
// that landed at version, when the commit before it landed within the
// idle window and the cap allows: one more round trip, WATCH and the
// reads under it. The caller holds s.hold.mu. Its failures are nobody's
// concern: the commit landed, and the next one takes the usual way.
func (s *Session) holdAfter(ctx context.Context, name string, version int64) {
	now := time.Now()
	recent := now.Sub(s.hold.last) < heldIdle
	s.hold.last = now
	if !recent || s.hold.h != nil {
		return
	}
	c := s.st.primaryFor(ctx, s.keys[0])
	if c == nil || c.PoolStats().IdleConns == 0 {
		return // never wait for a connection the Store's other calls need
	}
	if !s.st.held.reserve(s, s.st.heldCap) {
		return
	}
	h := s.newHeld(c.EphemeralConn(), name)
	watch, llen, ver := h.watchCmds(ctx)
	_, _ = h.conn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		_ = p.Process(ctx, watch)
		_ = p.Process(ctx, llen)
		_ = p.Process(ctx, ver)
		return nil
	})
	h.timer = time.AfterFunc(heldIdle, func() {
		s.hold.mu.Lock()
		defer s.hold.mu.Unlock()
		if s.hold.h == h {
			s.release()
		}
	})
	s.hold.h = h
	if !s.rearm(h, watch, llen, ver, version) {
		s.release()
	}
}

// release closes s's held connection (EphemeralConn: it never goes back
// to the pool, WATCH and all). The caller holds s.hold.mu.
func (s *Session) release() {
	h := s.hold.h
	s.hold.h = nil
	h.timer.Stop()
	_ = h.conn.Close()
	s.st.held.forget(s)
}

// primaryFor returns the client of the server that holds key, or nil when
// the Store's client has none to give (a Ring, or a cluster whose slot
// map cannot be had).
func (st *Store) primaryFor(ctx context.Context, key string) *goredis.Client {
	switch c := st.client.(type) {
	case *goredis.Client:
		return c
	case *goredis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil
		}
		return m
	}
	return nil
}
