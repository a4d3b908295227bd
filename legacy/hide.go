package legacy

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// Hide returns s with every optional capability hidden: only the core
// Session methods remain, as on a session written before limit reads, run
// context, replace, TTL or compaction existed. Callers then go through the
// session package's fallbacks (session.Latest reads everything and keeps the
// newest n; session.Replace clears and appends with restore), which must give
// the same answers.
func Hide(s session.Session) session.Session { return hidden{s} }

// hidden forwards the core methods only; embedding the interface type, not
// the concrete session, keeps every other method out of its method set.
type hidden struct{ s session.Session }

func (h hidden) SessionID() string                                 { return h.s.SessionID() }
func (h hidden) Items(ctx context.Context) ([]session.Item, error) { return h.s.Items(ctx) }
func (h hidden) AddItems(ctx context.Context, items []session.Item) error {
	return h.s.AddItems(ctx, items)
}
func (h hidden) PopItem(ctx context.Context) (session.Item, bool, error) { return h.s.PopItem(ctx) }
func (h hidden) Clear(ctx context.Context) error                         { return h.s.Clear(ctx) }
