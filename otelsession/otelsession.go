package otelsession

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/agentsessions/sessions/otelsession"

// Options configure Wrap.
type Options struct {
	// TracerProvider and MeterProvider default to OpenTelemetry's global
	// providers.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Backend names the store, as the attribute db.system.name ("sqlite",
	// "redis", …); empty leaves the attribute out.
	Backend string
	// RawSessionID puts the session id itself on spans. By default only a
	// SHA-256 prefix of it is recorded, since ids often name users.
	RawSessionID bool
}

// Attribute keys the wrapper records.
const (
	AttrBackend     = attribute.Key("db.system.name")
	AttrSessionID   = attribute.Key("session.id")
	AttrSessionHash = attribute.Key("session.id_hash")
	AttrOperation   = attribute.Key("session.operation")
	AttrItems       = attribute.Key("session.items")
	AttrBytes       = attribute.Key("session.bytes")
	AttrLimit       = attribute.Key("session.limit")
	AttrFound       = attribute.Key("session.found")
)

// The global providers as they are before any program sets its own: calls
// through them record nothing, so a wrapper on them skips its work until a
// program sets a provider.
var (
	unsetTracerProvider = otel.GetTracerProvider()
	unsetMeterProvider  = otel.GetMeterProvider()
)

// instruments are made once per Options, not per session.
type instruments struct {
	// global is set when the instruments come from the global providers;
	// noop when the providers given are OpenTelemetry's no-op ones.
	global, noop      bool
	tracer            trace.Tracer
	duration          metric.Float64Histogram
	itemsIn, itemsOut metric.Int64Counter
	bytesIn, bytesOut metric.Int64Counter
	corrupt           metric.Int64Counter
}

// off reports whether telemetry would record nothing, so that a call can go
// straight to the session.
func (in *instruments) off() bool {
	return in.noop || in.global && otel.GetTracerProvider() == unsetTracerProvider && otel.GetMeterProvider() == unsetMeterProvider
}

func newInstruments(o Options) *instruments {
	tp, mp := o.TracerProvider, o.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	in := &instruments{tracer: tp.Tracer(ScopeName), global: o.TracerProvider == nil && o.MeterProvider == nil}
	_, tnoop := tp.(tracenoop.TracerProvider)
	_, mnoop := mp.(metricnoop.MeterProvider)
	in.noop = tnoop && mnoop
	// Instrument creation fails only on invalid names; ours are constant.
	in.duration, _ = m.Float64Histogram("session.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of session operations."))
	in.itemsIn, _ = m.Int64Counter("session.items.written", metric.WithUnit("{item}"))
	in.itemsOut, _ = m.Int64Counter("session.items.read", metric.WithUnit("{item}"))
	in.bytesIn, _ = m.Int64Counter("session.bytes.written", metric.WithUnit("By"))
	in.bytesOut, _ = m.Int64Counter("session.bytes.read", metric.WithUnit("By"))
	in.corrupt, _ = m.Int64Counter("session.corrupt_records", metric.WithUnit("{record}"))
	return in
}

// Wrapper wraps sessions with one set of instruments.
type Wrapper struct {
	opts Options
	in   *instruments
}

// New returns a Wrapper for opts. Make one per process (or per store) and
// wrap every session with it.
func New(opts Options) *Wrapper { return &Wrapper{opts: opts, in: newInstruments(opts)} }

// Wrap wraps s with the Wrapper of opts; prefer New(opts).Wrap when
// wrapping many sessions.
func Wrap(s session.Session, opts Options) session.Session { return New(opts).Wrap(s) }

// Wrap returns s instrumented, with exactly s's capabilities.
func (w *Wrapper) Wrap(s session.Session) session.Session {
	t := &traced{inner: s, in: w.in}
	base := []attribute.KeyValue{w.idAttr(s.SessionID())}
	if w.opts.Backend != "" {
		base = append(base, AttrBackend.String(w.opts.Backend))
	}
	t.spanAttrs = base
	for op := range opCount {
		kv := []attribute.KeyValue{AttrOperation.String(opNames[op])}
		if w.opts.Backend != "" {
			kv = append(kv, AttrBackend.String(w.opts.Backend))
		}
		t.okSet[op] = metric.WithAttributeSet(attribute.NewSet(kv...))
		t.errSet[op] = metric.WithAttributeSet(attribute.NewSet(append(kv, attribute.String("error.type", "error"))...))
	}
	p := capwrap.Of(s)
	if p.Latest != nil {
		p.Latest = t.latestItems
	}
	if p.Replace != nil {
		p.Replace = t.replaceItems
	}
	if p.Compaction != nil {
		p.Compaction = t.runCompaction
	}
	return capwrap.Compose(t, p)
}

// idAttr is the attribute naming session id: a SHA-256 prefix unless the
// raw id was asked for.
func (w *Wrapper) idAttr(id string) attribute.KeyValue {
	if w.opts.RawSessionID {
		return AttrSessionID.String(id)
	}
	sum := sha256.Sum256([]byte(id))
	return AttrSessionHash.String(hex.EncodeToString(sum[:8]))
}

type op int

const (
	opItems op = iota
	opLatest
	opAdd
	opPop
	opClear
	opReplace
	opCompact
	opCount
)

var opNames = [opCount]string{"items", "latest", "add_items", "pop_item", "clear", "replace", "run_compaction"}

type traced struct {
	inner     session.Session
	in        *instruments
	spanAttrs []attribute.KeyValue
	okSet     [opCount]metric.MeasurementOption
	errSet    [opCount]metric.MeasurementOption
}

func (t *traced) SessionID() string          { return t.inner.SessionID() }
func (t *traced) AcceptsRunContext() bool    { return capwrap.AcceptsRunContext(t.inner) }
func (t *traced) IgnoreIDsForMatching() bool { return capwrap.IgnoresIDs(t.inner) }

// start opens the span of one operation.
func (t *traced) start(ctx context.Context, o op) (context.Context, trace.Span, time.Time) {
	ctx, span := t.in.tracer.Start(ctx, "session."+opNames[o], trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(t.spanAttrs...)
	}
	return ctx, span, time.Now()
}

// end closes the span and records the duration.
func (t *traced) end(ctx context.Context, o op, span trace.Span, began time.Time, err error) {
	set := t.okSet[o]
	if err != nil {
		set = t.errSet[o]
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	t.in.duration.Record(ctx, time.Since(began).Seconds(), set)
	span.End()
}

func sizeOf(items []session.Item) int64 {
	var n int64
	for _, it := range items {
		n += int64(len(it.Bytes()))
	}
	return n
}

// read records a read's items on the span and the counters.
func (t *traced) read(ctx context.Context, o op, span trace.Span, items []session.Item) {
	size := sizeOf(items)
	if span.IsRecording() {
		span.SetAttributes(AttrItems.Int(len(items)), AttrBytes.Int64(size))
	}
	t.in.itemsOut.Add(ctx, int64(len(items)), t.okSet[o])
	t.in.bytesOut.Add(ctx, size, t.okSet[o])
}

// wrote records a write's items on the span, and on the counters once it
// succeeded.
func (t *traced) wrote(ctx context.Context, o op, span trace.Span, items []session.Item, err error) {
	size := sizeOf(items)
	if span.IsRecording() {
		span.SetAttributes(AttrItems.Int(len(items)), AttrBytes.Int64(size))
	}
	if err == nil {
		t.in.itemsIn.Add(ctx, int64(len(items)), t.okSet[o])
		t.in.bytesIn.Add(ctx, size, t.okSet[o])
	}
}

func (t *traced) Items(ctx context.Context) (items []session.Item, err error) {
	if t.in.off() {
		return t.inner.Items(ctx)
	}
	ctx, span, began := t.start(ctx, opItems)
	defer func() { t.end(ctx, opItems, span, began, err) }()
	items, err = t.inner.Items(ctx)
	if err == nil {
		t.read(ctx, opItems, span, items)
	}
	return items, err
}

func (t *traced) latestItems(ctx context.Context, n int) (items []session.Item, err error) {
	if t.in.off() {
		return t.inner.(session.LatestReader).LatestItems(ctx, n)
	}
	ctx, span, began := t.start(ctx, opLatest)
	defer func() { t.end(ctx, opLatest, span, began, err) }()
	if span.IsRecording() {
		span.SetAttributes(AttrLimit.Int(n))
	}
	items, err = t.inner.(session.LatestReader).LatestItems(ctx, n)
	if err == nil {
		t.read(ctx, opLatest, span, items)
	}
	return items, err
}

func (t *traced) AddItems(ctx context.Context, items []session.Item) (err error) {
	if t.in.off() {
		return t.inner.AddItems(ctx, items)
	}
	ctx, span, began := t.start(ctx, opAdd)
	defer func() { t.end(ctx, opAdd, span, began, err) }()
	err = t.inner.AddItems(ctx, items)
	t.wrote(ctx, opAdd, span, items, err)
	return err
}

func (t *traced) replaceItems(ctx context.Context, items []session.Item) (err error) {
	if t.in.off() {
		return t.inner.(session.Replacer).ReplaceItems(ctx, items)
	}
	ctx, span, began := t.start(ctx, opReplace)
	defer func() { t.end(ctx, opReplace, span, began, err) }()
	err = t.inner.(session.Replacer).ReplaceItems(ctx, items)
	t.wrote(ctx, opReplace, span, items, err)
	return err
}

func (t *traced) PopItem(ctx context.Context) (it session.Item, ok bool, err error) {
	if t.in.off() {
		return t.inner.PopItem(ctx)
	}
	ctx, span, began := t.start(ctx, opPop)
	defer func() { t.end(ctx, opPop, span, began, err) }()
	it, ok, err = t.inner.PopItem(ctx)
	if span.IsRecording() {
		span.SetAttributes(AttrFound.Bool(ok))
	}
	if err == nil && ok {
		t.read(ctx, opPop, span, []session.Item{it})
	}
	return it, ok, err
}

func (t *traced) Clear(ctx context.Context) (err error) {
	if t.in.off() {
		return t.inner.Clear(ctx)
	}
	ctx, span, began := t.start(ctx, opClear)
	defer func() { t.end(ctx, opClear, span, began, err) }()
	return t.inner.Clear(ctx)
}

func (t *traced) runCompaction(ctx context.Context, args session.CompactionArgs) (err error) {
	if t.in.off() {
		return t.inner.(session.CompactionAware).RunCompaction(ctx, args)
	}
	ctx, span, began := t.start(ctx, opCompact)
	defer func() { t.end(ctx, opCompact, span, began, err) }()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("session.compaction.response_id", args.ResponseID),
			attribute.String("session.compaction.mode", string(args.Mode)), attribute.Bool("session.compaction.force", args.Force))
	}
	return t.inner.(session.CompactionAware).RunCompaction(ctx, args)
}
