package session

import "context"

// Session is one conversation's append-only history of items. It is the
// interface every backend implements; see the package documentation for the
// semantics each method must keep.
//
// Implementations must be safe for concurrent use by multiple goroutines,
// and two Sessions on the same id in the same store (two processes, two
// clients) must never lose or interleave each other's batches.
type Session interface {
	// SessionID returns the id this session was opened with.
	SessionID() string
	// Items returns the whole history, oldest first.
	Items(ctx context.Context) ([]Item, error)
	// AddItems appends items as one atomic batch. An empty batch is a no-op.
	// A batch holding an invalid item is rejected before anything is
	// written, with an error wrapping ErrInvalidItem.
	AddItems(ctx context.Context, items []Item) error
	// PopItem removes and returns the newest item. It returns ok == false
	// and no error when the session is empty.
	PopItem(ctx context.Context) (item Item, ok bool, err error)
	// Clear deletes every item of the session.
	Clear(ctx context.Context) error
}
