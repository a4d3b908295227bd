package runstate

import "context"

// EventKind names a step in the life of a pending Session write.
type EventKind string

// The events an observer receives.
const (
	// EventAppended: a pending write's batch was appended (at its save, or
	// by a recovery that found the session unchanged).
	EventAppended EventKind = "appended"
	// EventLostAckAccepted: a recovery found the batch already committed
	// (its acknowledgement was lost) and appended nothing.
	EventLostAckAccepted EventKind = "lost-ack-accepted"
	// EventRefused: a recovery could not reconcile the session's tail with
	// the record (ErrCannotReconcile); nothing was written.
	EventRefused EventKind = "refused"
	// EventHeldSettled: a held batch settled, at resume entry or at an exit.
	EventHeldSettled EventKind = "held-settled"
	// EventHeldDiscarded: a held batch was discarded after a successful
	// exit (DiscardHeldAfter).
	EventHeldDiscarded EventKind = "held-discarded"
)

// Event is one step of a pending write's life.
type Event struct {
	Kind      EventKind
	SessionID string
	Items     int // the batch's items
}

type observerKey struct{}

// WithObserver returns a copy of ctx whose settles, recoveries and held
// writes report to f (as otelsession.RunStateEvents puts them on the
// current span). f runs synchronously and must not block.
func WithObserver(ctx context.Context, f func(context.Context, Event)) context.Context {
	return context.WithValue(ctx, observerKey{}, f)
}

func observe(ctx context.Context, e Event) {
	if f, ok := ctx.Value(observerKey{}).(func(context.Context, Event)); ok && f != nil {
		f(ctx, e)
	}
}
