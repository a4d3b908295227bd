package session

import (
	"context"
	"errors"
)

// Cursor is a reader's position in one session's history: the point just
// after the last item it has read. The zero Cursor is the start of the
// history. A Cursor is opaque and meaningful only to the session that
// returned it (and to other sessions on the same id in the same store); it
// is a string so that it can travel in a checkpoint.
type Cursor string

// ErrCursorLost reports a cursor whose items are no longer all in the
// history as the reader saw them: a pop removed an item at or before the
// cursor, or a clear or a replace rewrote the history since the cursor was
// returned. Nothing is read; the reader reads the whole history again
// (ReadSince with the zero Cursor). A pop of items the reader never saw is
// not reported: they are simply not there to read. The zero Cursor is
// never lost. A store that bounds what it remembers of pops may report a
// cursor lost early, never late: Redis's native layout does for a cursor
// older than about the last 200 pops at rising positions (see
// adapters/redis); the reader then reads the whole history again, as after
// any loss.
var ErrCursorLost = errors.New("session: history changed at or before the cursor")

// Follower is implemented by sessions that read only what was appended
// after a cursor, in time proportional to what is new, not to the history.
//
// A cursor names the last item read (or the start), so it stays good
// across appends and across pops of items after it, and is lost once that
// item is gone (a pop, a clear, a replace), even if equal items took its
// place. A cursor works on every Session of the same id in the same store
// (another process's included). A cursor of another session id is either
// refused (ErrCursorLost or ErrInvalidCursor) or reads what this history
// has after some position; it never reads items this history lacks.
//
// If a Session does not implement Follower, ReadSince reads the whole
// history and keeps what follows the cursor; its cursors then carry the
// number of items read and a digest of them, so that a rewrite is still
// reported, unless it left those items byte for byte as they were. The
// two kinds of cursor do not mix: a cursor of one kind is ErrInvalidCursor
// to the other, and the reader starts again from the zero Cursor.
type Follower interface {
	Session
	// ItemsSince returns the items after cursor, oldest first, and the
	// cursor after the last of them (cursor itself when nothing is new).
	// It returns ErrCursorLost when the history changed at or before
	// cursor, and an error wrapping ErrInvalidCursor for a cursor this
	// session did not return.
	ItemsSince(ctx context.Context, cursor Cursor) ([]Item, Cursor, error)
}

// ErrInvalidCursor reports a cursor no session of this kind returns: a
// corrupt or foreign string.
var ErrInvalidCursor = errors.New("session: invalid cursor")

// OnceAppender is implemented by sessions that append a batch at most once
// per operation id: a caller that lost the answer to an append (a timeout,
// ErrOutcomeUnknown, a crash before it recorded the outcome) retries with
// the same id and the batch lands exactly once. The operation id is
// recorded in the same atomic step as the batch.
//
// Operation ids are kept per session for as long as the session exists:
// Clear, PopItem and replaces keep them (an operation that happened stays
// happened), and removing the session from its store removes them.
//
// There is no fallback: without this capability AppendOnce returns
// ErrUnsupported, because an append cannot be made idempotent from outside
// the store.
type OnceAppender interface {
	Session
	// AddItemsOnce appends items as one atomic batch unless a batch with
	// opID was already appended to this session, and reports whether this
	// call carried the operation out (false: an earlier call did, and
	// nothing was written). An empty opID is ErrInvalidOperationID. An
	// empty batch records opID, appends nothing and reports true. A batch
	// refused (ErrInvalidItem, an error before the write) records nothing,
	// so a later call with the same opID appends.
	AddItemsOnce(ctx context.Context, opID string, items []Item) (appended bool, err error)
}

// ErrInvalidOperationID reports an empty (or otherwise unusable) operation
// id.
var ErrInvalidOperationID = errors.New("session: invalid operation id")
