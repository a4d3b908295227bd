package runstate

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// Resume settles the pending write at resume entry, before any model call
// or tool re-execution (Python's resume_pending_session_write, with the
// terminal check first):
//
//   - a terminal checkpoint fails with ErrTerminal before any Session access;
//   - no record: nothing to do;
//   - an ordinary record is recovered (spec §3.4): ErrWriteInProgress during
//     a settle, ErrWrongSession for a nil or different session, then the
//     tail decides between appending, accepting a lost acknowledgement and
//     ErrCannotReconcile; on success cp.PersistedCount takes the record's
//     count and the slot is cleared; a session error is returned wrapped and
//     the record is kept;
//   - a held record (spec §3.5.4) fails with ErrWrongSession for a different
//     attached session, rides untouched when detached or not run-again, and
//     otherwise settles now through Save with the parked response's id and
//     store (ordinary registration, compaction bookkeeping).
//
// The returned SaveResult describes a held entry settle (zero otherwise).
func (cp *Checkpoint) Resume(ctx context.Context, s session.Session) (SaveResult, error) {
	panic("todo")
}
