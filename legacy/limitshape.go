package legacy

import (
	"context"
	"fmt"
	"strconv"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// LimitSession is the session shape of github.com/nlpodyssey/openai-agents-go's
// memory.Session, generic over its item type T. Instantiate it with
// json.RawMessage or session.Item, which keep items byte for byte. That
// library's own T, openai-go's responses.ResponseInputItemUnionParam, loses
// items through JSONCodec (see there); with it, pass the lossless Codec of
// github.com/agentsessions/sessions/integrations/openaigo. Every method
// takes a context, SessionID included;
// GetItems takes a limit where limit <= 0 means every item; PopItem
// returns nil when the session is empty.
//
// Any type with these five methods satisfies LimitSession, so an
// nlpodyssey session is used with FromLimitSession without this module
// depending on nlpodyssey or openai-go.
type LimitSession[T any] interface {
	// SessionID returns the session's id.
	SessionID(ctx context.Context) string
	// GetItems returns the newest limit items, oldest first; limit <= 0
	// returns every item.
	GetItems(ctx context.Context, limit int) ([]T, error)
	// AddItems appends items.
	AddItems(ctx context.Context, items []T) error
	// PopItem removes and returns the newest item, or nil when the session
	// is empty.
	PopItem(ctx context.Context) (*T, error)
	// ClearSession deletes every item.
	ClearSession(ctx context.Context) error
}

// LimitOptions configures FromLimitSessionWith.
type LimitOptions[T any] struct {
	// Codec converts items; nil means JSONCodec[T].
	Codec Codec[T]
	// OnCorrupt receives a report for every item of the wrapped session
	// that the codec cannot turn into a JSON object (its Position is
	// "GetItems index <i>" or "PopItem"); nil logs a slog warning.
	OnCorrupt driver.CorruptHandler
}

// FromLimitSession returns s as a session.Session, converting items with c
// (nil means JSONCodec[T]). It is FromLimitSessionWith with only a codec.
func FromLimitSession[T any](s LimitSession[T], c Codec[T]) session.Session {
	return FromLimitSessionWith(s, LimitOptions[T]{Codec: c})
}

// FromLimitSessionWith returns s as a session.Session that also implements
// session.LatestReader. The calls map as follows ("ours" is the returned
// session, "theirs" is s):
//
//	ours                     theirs
//	SessionID()              SessionID(context.Background())
//	Items(ctx)               GetItems(ctx, 0)        (limit <= 0 means all)
//	LatestItems(ctx, n > 0)  GetItems(ctx, n)        (doubled while corrupt items hide valid ones)
//	LatestItems(ctx, 0)      no call; empty result   (their 0 would mean all)
//	LatestItems(ctx, n < 0)  no call; ErrInvalidLimit (their n < 0 would mean all)
//	AddItems(ctx, items)     AddItems(ctx, decoded)  (whole batch validated and decoded first; empty batch: no call)
//	PopItem(ctx)             GetItems(ctx, 1), then PopItem(ctx) (nil -> (Item{}, false, nil))
//	Clear(ctx)               ClearSession(ctx)
//
// Every call (after LatestItems' limit check and AddItems' batch
// validation) returns ctx.Err() for a done context and an error wrapping
// session.ErrInvalidSessionID for an empty id before calling anything.
// An item of s that the codec cannot encode as a JSON object is skipped
// and reported through opts.OnCorrupt, never silently: a read returns the
// other items (a limit counts encodable items only); a pop finding it
// newest keeps it and fails with session.ErrCorruptRecord, since the shape
// can pop only the newest.
//
// The shim adds no guarantee s lacks: AddItems is atomic, and two handles
// on one id are safe, only if s makes them so (nlpodyssey's SQLiteSession
// inserts item by item without a transaction, and orders by a timestamp of
// one-second resolution). A PopItem of s that returns nil for a corrupt
// newest record, as nlpodyssey's SQLiteSession does, reads as an empty
// session: nil is the only signal the shape has.
func FromLimitSessionWith[T any](s LimitSession[T], opts LimitOptions[T]) session.Session {
	return &fromLimit[T]{s: s, c: codecOr(opts.Codec), onCorrupt: opts.OnCorrupt}
}

type fromLimit[T any] struct {
	s         LimitSession[T]
	c         Codec[T]
	onCorrupt driver.CorruptHandler
}

var _ session.LatestReader = (*fromLimit[session.Item])(nil)

func (a *fromLimit[T]) SessionID() string { return a.s.SessionID(context.Background()) }

// ready checks the context, then the id.
func (a *fromLimit[T]) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return driver.ValidateID(a.SessionID())
}

func (a *fromLimit[T]) report(ctx context.Context, pos string, v T, err error) {
	var raw []byte
	if b, merr := jsonBytes(v); merr == nil {
		raw = b
	}
	a.onCorrupt.Report(ctx, driver.CorruptRecord{SessionID: a.SessionID(), Position: pos, Raw: raw, Err: err})
}

func (a *fromLimit[T]) reportAll(ctx context.Context, bad []rejected[T]) {
	for _, r := range bad {
		a.report(ctx, "GetItems index "+strconv.Itoa(r.pos), r.v, r.err)
	}
}

func (a *fromLimit[T]) Items(ctx context.Context) ([]session.Item, error) {
	if err := a.ready(ctx); err != nil {
		return nil, err
	}
	ts, err := a.s.GetItems(ctx, 0)
	if err != nil {
		return nil, err
	}
	out, bad := convertAll(ts, a.c.Encode)
	a.reportAll(ctx, bad)
	return out, nil
}

func (a *fromLimit[T]) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: %d", session.ErrInvalidLimit, n)
	}
	if err := a.ready(ctx); err != nil {
		return nil, err
	}
	if n == 0 {
		return []session.Item{}, nil
	}
	out, bad, err := latestValid(n, func(limit int) ([]T, error) { return a.s.GetItems(ctx, limit) }, a.c.Encode)
	if err != nil {
		return nil, err
	}
	a.reportAll(ctx, bad)
	return out, nil
}

func (a *fromLimit[T]) AddItems(ctx context.Context, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := a.ready(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	ts := make([]T, len(items))
	for i, it := range items {
		v, err := a.c.Decode(it)
		if err != nil {
			return &session.ItemError{Index: i, Err: err}
		}
		ts[i] = v
	}
	return a.s.AddItems(ctx, ts)
}

// PopItem reads the newest item before popping it: the shape's PopItem
// removes whatever is newest, so an unreadable newest record is reported
// and kept, and PopItem fails with session.ErrCorruptRecord.
func (a *fromLimit[T]) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := a.ready(ctx); err != nil {
		return session.Item{}, false, err
	}
	newest, err := a.s.GetItems(ctx, 1)
	if err != nil || len(newest) == 0 {
		return session.Item{}, false, err
	}
	if _, err := a.c.Encode(newest[len(newest)-1]); err != nil {
		a.report(ctx, "PopItem", newest[len(newest)-1], err)
		return session.Item{}, false, fmt.Errorf("%w: the newest record is unreadable and the wrapped session can only pop the newest; nothing removed", session.ErrCorruptRecord)
	}
	p, err := a.s.PopItem(ctx)
	if err != nil || p == nil {
		return session.Item{}, false, err
	}
	it, err := a.c.Encode(*p)
	if err != nil {
		// Another writer put it there after the read above.
		a.report(ctx, "PopItem", *p, err)
		return session.Item{}, false, fmt.Errorf("%w: the wrapped session popped an unreadable record written meanwhile (reported with its bytes)", session.ErrCorruptRecord)
	}
	return it, true, nil
}

func (a *fromLimit[T]) Clear(ctx context.Context) error {
	if err := a.ready(ctx); err != nil {
		return err
	}
	return a.s.ClearSession(ctx)
}

// ToLimitSession returns s in the LimitSession shape, converting items with
// c (nil means JSONCodec[T]). The calls map as follows ("ours" is s,
// "theirs" is the returned LimitSession):
//
//	theirs                   ours
//	SessionID(ctx)           SessionID()
//	GetItems(ctx, limit<=0)  session.All(ctx, s)     (every item)
//	GetItems(ctx, limit>0)   session.Latest(ctx, s, limit)
//	AddItems(ctx, items)     session.Append(ctx, s, encoded) (whole batch encoded first)
//	PopItem(ctx)             session.Pop(ctx, s)     ((Item{}, false) -> nil)
//	ClearSession(ctx)        session.Clear(ctx, s)
//
// The session package's functions give s its fallbacks (Latest on a
// session without LatestReader reads all and keeps the newest) and the
// run context only when s accepts it. A stored item the codec cannot
// decode into a T is skipped and reported through a slog warning (a
// limit counts decodable items only; a pop removes it and pops the next);
// use ToLimitSessionWith to receive the reports.
func ToLimitSession[T any](s session.Session, c Codec[T]) LimitSession[T] {
	return ToLimitSessionWith(s, LimitOptions[T]{Codec: c})
}

// ToLimitSessionWith is ToLimitSession with options: opts.OnCorrupt
// receives a report (Position "item <i>" or "PopItem") for each stored
// item the codec cannot decode.
func ToLimitSessionWith[T any](s session.Session, opts LimitOptions[T]) LimitSession[T] {
	return &toLimit[T]{s: s, c: codecOr(opts.Codec), onCorrupt: opts.OnCorrupt}
}

type toLimit[T any] struct {
	s         session.Session
	c         Codec[T]
	onCorrupt driver.CorruptHandler
}

func (a *toLimit[T]) SessionID(context.Context) string { return a.s.SessionID() }

func (a *toLimit[T]) report(ctx context.Context, pos string, it session.Item, err error) {
	a.onCorrupt.Report(ctx, driver.CorruptRecord{SessionID: a.s.SessionID(), Position: pos, Raw: it.Bytes(), Err: err})
}

func (a *toLimit[T]) GetItems(ctx context.Context, limit int) ([]T, error) {
	var (
		out []T
		bad []rejected[session.Item]
	)
	if limit <= 0 {
		items, err := session.All(ctx, a.s)
		if err != nil {
			return nil, err
		}
		out, bad = convertAll(items, a.c.Decode)
	} else {
		var err error
		out, bad, err = latestValid(limit, func(n int) ([]session.Item, error) {
			if n == 0 {
				return session.All(ctx, a.s)
			}
			return session.Latest(ctx, a.s, n)
		}, a.c.Decode)
		if err != nil {
			return nil, err
		}
	}
	for _, r := range bad {
		a.report(ctx, "item "+strconv.Itoa(r.pos), r.v, r.err)
	}
	return out, nil
}

func (a *toLimit[T]) AddItems(ctx context.Context, items []T) error {
	enc := make([]session.Item, len(items))
	for i, v := range items {
		it, err := a.c.Encode(v)
		if err != nil {
			return &session.ItemError{Index: i, Err: err}
		}
		enc[i] = it
	}
	return session.Append(ctx, a.s, enc)
}

func (a *toLimit[T]) PopItem(ctx context.Context) (*T, error) {
	for {
		it, ok, err := session.Pop(ctx, a.s)
		if err != nil || !ok {
			return nil, err
		}
		v, err := a.c.Decode(it)
		if err == nil {
			return &v, nil
		}
		a.report(ctx, "PopItem", it, err)
	}
}

func (a *toLimit[T]) ClearSession(ctx context.Context) error { return session.Clear(ctx, a.s) }
