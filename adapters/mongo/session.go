package mongo

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Session is a handle on one session of a Store. It is safe for concurrent
// use, and any number of handles (in this process or others, with this
// Store or another client) may work on the same session id.
type Session struct {
	st *Store
	id string
	// floor is the highest seq this handle has reserved or read. A
	// reservation below it means the server lost an update (single-document
	// updates are atomic on MongoDB, not on FerretDB v1): the handle then
	// pushes the counter up and reserves again, so that its own batches
	// never land out of order. On MongoDB it never triggers.
	floor atomic.Int64
}

var (
	_ session.LatestReader      = (*Session)(nil)
	_ session.Replacer          = (*Session)(nil)
	_ session.Expirer           = (*Session)(nil)
	_ session.CheckpointStore   = (*Session)(nil)
	_ session.VersionedReplacer = (*Session)(nil)
)

// SessionID returns the session's id.
func (s *Session) SessionID() string { return s.id }

// noteSeq raises the handle's floor to seq.
func (s *Session) noteSeq(seq int64) {
	for {
		cur := s.floor.Load()
		if seq <= cur || s.floor.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// backoff waits a little, more after each attempt, with jitter; it
// returns early with the context's error.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(1+rand.IntN(2+attempt)) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// check returns the context's error, or session.ErrClosed after the
// Store's Close. Every call checks it first, before any I/O.
func (s *Session) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.st.closed.Load() {
		return session.ErrClosed
	}
	return nil
}
