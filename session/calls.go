package session

import (
	"context"
	"errors"
	"fmt"
)

// Latest returns the newest n items of s, oldest first: n > 0 gives at most
// n items, n == 0 gives none, n < 0 returns ErrInvalidLimit. It uses
// LatestReader when s has it and otherwise reads the whole history and keeps
// the newest n, so both paths answer identically.
func Latest(ctx context.Context, s Session, n int) ([]Item, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidLimit, n)
	}
	if n == 0 {
		// Still honour a cancelled context, as the backend call would.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return []Item{}, nil
	}
	ctx = ContextFor(ctx, s)
	if lr, ok := s.(LatestReader); ok {
		return lr.LatestItems(ctx, n)
	}
	all, err := s.Items(ctx)
	if err != nil {
		return nil, err
	}
	return tail(all, n), nil
}

// tail returns the newest n of items (all of them when n exceeds their
// number), as a slice of items; it panics on n < 0.
func tail(items []Item, n int) []Item {
	if n >= len(items) {
		return items
	}
	return items[len(items)-n:]
}

// All returns the whole history of s, oldest first.
func All(ctx context.Context, s Session) ([]Item, error) {
	return s.Items(ContextFor(ctx, s))
}

// Append adds items to s as one atomic batch.
func Append(ctx context.Context, s Session, items []Item) error {
	return s.AddItems(ContextFor(ctx, s), items)
}

// Pop removes and returns the newest item of s.
func Pop(ctx context.Context, s Session) (Item, bool, error) {
	return s.PopItem(ContextFor(ctx, s))
}

// Clear deletes every item of s.
func Clear(ctx context.Context, s Session) error {
	return s.Clear(ContextFor(ctx, s))
}

// ErrReplaceRestore reports a fallback Replace whose append failed and whose
// restore of the previous history failed too: the history may be partial.
var ErrReplaceRestore = errors.New("session: replace failed and the previous history could not be restored")

// Replace replaces the whole history of s with items. It uses Replacer when
// s has it (atomic); otherwise it snapshots the history, clears it and
// appends items, restoring the snapshot if the append fails. The fallback is
// not atomic to concurrent readers.
func Replace(ctx context.Context, s Session, items []Item) error {
	if err := validateBatch(items); err != nil {
		return err
	}
	ctx = ContextFor(ctx, s)
	if r, ok := s.(Replacer); ok {
		return r.ReplaceItems(ctx, items)
	}
	before, err := s.Items(ctx)
	if err != nil {
		return err
	}
	if err := s.Clear(ctx); err != nil {
		return err
	}
	err = s.AddItems(ctx, items)
	if err == nil {
		return nil
	}
	// Restore even if ctx was cancelled: the outcome must be known.
	rctx := context.WithoutCancel(ctx)
	if cerr := s.Clear(rctx); cerr != nil {
		return fmt.Errorf("%w: %w (restore: %w)", ErrReplaceRestore, err, cerr)
	}
	if aerr := s.AddItems(rctx, before); aerr != nil {
		return fmt.Errorf("%w: %w (restore: %w)", ErrReplaceRestore, err, aerr)
	}
	return err
}

// Version returns the version of s's stored history, for ReplaceIf. It
// returns ErrUnsupported if s is not a VersionedReplacer.
func Version(ctx context.Context, s Session) (string, error) {
	v, ok := s.(VersionedReplacer)
	if !ok {
		return "", fmt.Errorf("%w: the session cannot version its history", ErrUnsupported)
	}
	return v.HistoryVersion(ContextFor(ctx, s))
}

// ReplaceIf atomically replaces s's history with items if its version is
// still version (from Version), and otherwise returns ErrHistoryChanged
// and writes nothing. It returns ErrUnsupported if s is not a
// VersionedReplacer: there is no safe fallback.
func ReplaceIf(ctx context.Context, s Session, version string, items []Item) error {
	if err := validateBatch(items); err != nil {
		return err
	}
	v, ok := s.(VersionedReplacer)
	if !ok {
		return fmt.Errorf("%w: the session cannot replace its history conditionally", ErrUnsupported)
	}
	return v.ReplaceItemsIf(ContextFor(ctx, s), version, items)
}

// ReadSince returns the items of s appended after cursor (the zero Cursor:
// the whole history) and the cursor after them. It returns ErrCursorLost
// when the history changed at or before cursor (see Follower).
//
// If s is not a Follower, ReadSince reads the whole history; its cursors
// hold the number of items read and a digest of them, so a pop, clear or
// replace below the cursor is still reported.
func ReadSince(ctx context.Context, s Session, cursor Cursor) ([]Item, Cursor, error) {
	if f, ok := s.(Follower); ok {
		return f.ItemsSince(ContextFor(ctx, s), cursor)
	}
	n, sum, err := parseFallbackCursor(cursor)
	if err != nil {
		return nil, cursor, err
	}
	items, err := s.Items(ContextFor(ctx, s))
	if err != nil {
		return nil, cursor, err
	}
	if len(items) < n || fallbackSum(items[:n]) != sum {
		return nil, cursor, ErrCursorLost
	}
	if len(items) == n {
		return nil, cursor, nil
	}
	return items[n:], fallbackCursor(items), nil
}

// AppendOnce appends items to s as one batch unless a batch with opID was
// already appended, and reports whether this call appended (see
// OnceAppender). It returns ErrUnsupported if s is not a OnceAppender.
func AppendOnce(ctx context.Context, s Session, opID string, items []Item) (bool, error) {
	if opID == "" {
		return false, ErrInvalidOperationID
	}
	if err := validateBatch(items); err != nil {
		return false, err
	}
	o, ok := s.(OnceAppender)
	if !ok {
		return false, fmt.Errorf("%w: the session cannot append at most once", ErrUnsupported)
	}
	return o.AddItemsOnce(ContextFor(ctx, s), opID, items)
}
