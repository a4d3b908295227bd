package conformance_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/agentsessions/sessions/session"
)

// folPart is the reference adapter's Follower.
type folPart struct{ f session.Follower }

func (p folPart) ItemsSince(ctx context.Context, c session.Cursor) ([]session.Item, session.Cursor, error) {
	return p.f.ItemsSince(ctx, c)
}

// oncePart is the reference adapter's OnceAppender.
type oncePart struct{ o session.OnceAppender }

func (p oncePart) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	return p.o.AddItemsOnce(ctx, opID, items)
}

// countsItems follows by counting: its cursor is the number of items read,
// so a pop of a read item followed by an append goes unnoticed and the
// reader never sees the new item in its place.
type countsItems struct{ std }

func (c countsItems) ItemsSince(ctx context.Context, cur session.Cursor) ([]session.Item, session.Cursor, error) {
	n := 0
	if cur != "" {
		var err error
		if n, err = strconv.Atoi(string(cur)); err != nil || n < 0 {
			return nil, cur, fmt.Errorf("%w: %q", session.ErrInvalidCursor, string(cur))
		}
	}
	items, err := c.Items(ctx)
	if err != nil {
		return nil, cur, err
	}
	if len(items) < n {
		return nil, cur, session.ErrCursorLost
	}
	if len(items) == n {
		return nil, cur, nil
	}
	return items[n:], session.Cursor(strconv.Itoa(len(items))), nil
}

// forgetsOnClear keeps operation ids beside the store and drops a
// session's ids when it is cleared: a retry after a clear appends again.
type forgetsOnClear struct {
	std
	ops *onceLog
}

type onceLog struct {
	mu  sync.Mutex
	ids map[string]bool // session id + "\x00" + operation id
}

func (f forgetsOnClear) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	if opID == "" {
		return false, session.ErrInvalidOperationID
	}
	f.ops.mu.Lock()
	defer f.ops.mu.Unlock()
	key := f.SessionID() + "\x00" + opID
	if f.ops.ids[key] {
		return false, nil
	}
	if err := f.AddItems(ctx, items); err != nil {
		return false, err
	}
	f.ops.ids[key] = true
	return true, nil
}

func (f forgetsOnClear) Clear(ctx context.Context) error {
	f.ops.mu.Lock()
	defer f.ops.mu.Unlock()
	for key := range f.ops.ids {
		if len(key) > len(f.SessionID()) && key[:len(f.SessionID())+1] == f.SessionID()+"\x00" {
			delete(f.ops.ids, key)
		}
	}
	return f.std.Clear(ctx)
}
