package legacy

import (
	"context"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// PlainSession is a session written without context.Context parameters:
// session.Session's methods and semantics, minus the contexts.
type PlainSession interface {
	// SessionID returns the session's id.
	SessionID() string
	// Items returns the whole history, oldest first.
	Items() ([]session.Item, error)
	// AddItems appends items as one atomic batch.
	AddItems(items []session.Item) error
	// PopItem removes and returns the newest item; ok is false when the
	// session is empty.
	PopItem() (item session.Item, ok bool, err error)
	// Clear deletes every item.
	Clear() error
}

// FromPlain returns p as a session.Session. The calls map one to one
// (Items to Items, PopItem to PopItem, ...). AddItems first validates the
// whole batch (driver.ValidateBatch); then every call returns ctx.Err()
// for a done context and an error wrapping session.ErrInvalidSessionID for
// an empty id before calling p. An empty batch calls nothing.
//
// A call, once started, cannot be cancelled: p has no context to watch, so
// a deadline or cancellation that arrives mid-call is noticed only by the
// next call. The started call runs to completion and its outcome is
// returned as is (a write that landed is reported as landed, never as
// ctx.Err()), as Python's SQLiteSession lets a started mutation finish.
//
// The result implements no optional capability: session.Latest and
// session.Replace use their fallbacks on it, and it never receives the run
// context.
func FromPlain(p PlainSession) session.Session { return fromPlain{p} }

type fromPlain struct{ p PlainSession }

func (a fromPlain) SessionID() string { return a.p.SessionID() }

// ready checks the context, then the id.
func (a fromPlain) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return driver.ValidateID(a.p.SessionID())
}

func (a fromPlain) Items(ctx context.Context) ([]session.Item, error) {
	if err := a.ready(ctx); err != nil {
		return nil, err
	}
	return a.p.Items()
}

func (a fromPlain) AddItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := a.ready(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	return a.p.AddItems(items)
}

func (a fromPlain) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := a.ready(ctx); err != nil {
		return session.Item{}, false, err
	}
	return a.p.PopItem()
}

func (a fromPlain) Clear(ctx context.Context) error {
	if err := a.ready(ctx); err != nil {
		return err
	}
	return a.p.Clear()
}

// ToPlain returns s as a PlainSession whose calls use
// context.Background(): they are never cancelled and carry no run context.
// They go through the session package's functions (session.All,
// session.Append, session.Pop, session.Clear).
func ToPlain(s session.Session) PlainSession { return toPlain{s} }

type toPlain struct{ s session.Session }

func (a toPlain) SessionID() string { return a.s.SessionID() }
func (a toPlain) Items() ([]session.Item, error) {
	return session.All(context.Background(), a.s)
}
func (a toPlain) AddItems(items []session.Item) error {
	return session.Append(context.Background(), a.s, items)
}
func (a toPlain) PopItem() (session.Item, bool, error) {
	return session.Pop(context.Background(), a.s)
}
func (a toPlain) Clear() error { return session.Clear(context.Background(), a.s) }
