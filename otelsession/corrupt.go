package otelsession

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentsessions/sessions/session/driver"
)

// CorruptHandler returns a driver.CorruptHandler, for a store's options,
// that counts each corrupt record on session.corrupt_records, adds an event
// to the current span, and passes the report on to next (nil: the default
// warning log). The record's bytes never reach telemetry.
func (w *Wrapper) CorruptHandler(next driver.CorruptHandler) driver.CorruptHandler {
	var kv []attribute.KeyValue
	if w.opts.Backend != "" {
		kv = append(kv, AttrBackend.String(w.opts.Backend))
	}
	set := metric.WithAttributeSet(attribute.NewSet(kv...))
	return func(ctx context.Context, r driver.CorruptRecord) {
		if w.in.off() {
			next.Report(ctx, r)
			return
		}
		w.in.corrupt.Add(ctx, 1, set)
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent("session.corrupt_record", trace.WithAttributes(
				w.idAttr(r.SessionID), attribute.String("session.position", r.Position), AttrBytes.Int(len(r.Raw))))
		}
		next.Report(ctx, r)
	}
}
