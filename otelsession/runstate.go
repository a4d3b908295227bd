package otelsession

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsessions/sessions/runstate"
)

// RunStateEvents puts a pending write's settles, recoveries and held
// batches on the span in ctx, as events named "runstate.<kind>" (appended,
// lost-ack-accepted, refused, held-settled, held-discarded) with the batch
// size. Install it around a resume:
//
//	ctx = runstate.WithObserver(ctx, otelsession.RunStateEvents)
//	_, err := cp.Resume(ctx, s)
//
// The session id is hashed as the wrappers' default is.
func RunStateEvents(ctx context.Context, e runstate.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("runstate."+string(e.Kind), trace.WithAttributes(
		(&Wrapper{}).idAttr(e.SessionID), AttrItems.Int(e.Items), attribute.String("runstate.event", string(e.Kind))))
}
