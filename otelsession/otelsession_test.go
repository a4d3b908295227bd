package otelsession_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/otelsession"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	opts   otelsession.Options
}

func newTelemetry(raw bool) *telemetry {
	rec := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	return &telemetry{spans: rec, reader: reader, opts: otelsession.Options{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		Backend:        "memory",
		RawSessionID:   raw,
	}}
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// sums returns each counter's total by name.
func (tm *telemetry) sums(t *testing.T) (map[string]int64, map[string]uint64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	sums, counts := map[string]int64{}, map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value("session.operation")
					counts[m.Name+"/"+op.AsString()] += p.Count
				}
			}
		}
	}
	return sums, counts
}

func TestSpansAndMetrics(t *testing.T) {
	ctx := context.Background()
	tm := newTelemetry(false)
	inner, err := memory.NewSession("user-42")
	require.NoError(t, err)
	s := otelsession.Wrap(inner, tm.opts)
	items, err := session.ParseItems(`{"role":"user","content":"hi"}`, `{"type":"message","role":"assistant","content":"yo"}`)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, items))
	got, err := session.Latest(ctx, s, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, session.Replace(ctx, s, items[:1]))
	all, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.NoError(t, s.Clear(ctx))
	err = s.AddItems(ctx, []session.Item{{}})
	require.ErrorIs(t, err, session.ErrInvalidItem)

	spans := tm.spans.Ended()
	var names []string
	for _, sp := range spans {
		names = append(names, sp.Name())
		a := attrs(sp.Attributes())
		require.Equal(t, "memory", a["db.system.name"].AsString())
		require.NotContains(t, a, attribute.Key("session.id"), "the raw id is opt-in")
		require.Len(t, a["session.id_hash"].AsString(), 16)
	}
	require.Equal(t, []string{"session.add_items", "session.latest", "session.pop_item", "session.replace", "session.items", "session.clear", "session.add_items"}, names)
	add := attrs(spans[0].Attributes())
	require.EqualValues(t, 2, add["session.items"].AsInt64())
	require.EqualValues(t, len(items[0].Bytes())+len(items[1].Bytes()), add["session.bytes"].AsInt64())
	last := spans[len(spans)-1]
	require.Equal(t, "Error", last.Status().Code.String())
	require.NotEmpty(t, last.Events(), "the error is recorded")

	sums, counts := tm.sums(t)
	require.EqualValues(t, 3, sums["session.items.written"], "2 appended + 1 replaced; the refused batch is not counted")
	require.EqualValues(t, 3, sums["session.items.read"], "1 latest + 1 popped + 1 read")
	require.EqualValues(t, 2, counts["session.operation.duration/add_items"])
	require.EqualValues(t, 1, counts["session.operation.duration/latest"])
}

func TestRawSessionIDOptIn(t *testing.T) {
	tm := newTelemetry(true)
	inner, err := memory.NewSession("user-42")
	require.NoError(t, err)
	s := otelsession.Wrap(inner, tm.opts)
	_, err = s.Items(context.Background())
	require.NoError(t, err)
	a := attrs(tm.spans.Ended()[0].Attributes())
	require.Equal(t, "user-42", a["session.id"].AsString())
}

func TestCorruptHandlerCounts(t *testing.T) {
	tm := newTelemetry(false)
	w := otelsession.New(tm.opts)
	var passed []driver.CorruptRecord
	h := w.CorruptHandler(func(_ context.Context, r driver.CorruptRecord) { passed = append(passed, r) })
	h(context.Background(), driver.CorruptRecord{SessionID: "s", Position: "7", Raw: []byte("nope"), Err: errors.New("bad")})
	require.Len(t, passed, 1)
	sums, _ := tm.sums(t)
	require.EqualValues(t, 1, sums["session.corrupt_records"])
}

type coreOnly struct{ session.Session }

func TestCapabilitiesPassThrough(t *testing.T) {
	inner, err := memory.NewSession("caps")
	require.NoError(t, err)
	opts := otelsession.Options{TracerProvider: noop.NewTracerProvider()}
	require.Equal(t, session.Probe(inner), session.Probe(otelsession.Wrap(inner, opts)))
	require.Equal(t, session.Capabilities(0), session.Probe(otelsession.Wrap(coreOnly{inner}, opts)))
}

// BenchmarkNoProvider measures the wrapper with OpenTelemetry's global
// no-op providers against the bare session, in the same run.
func BenchmarkNoProvider(b *testing.B) {
	ctx := context.Background()
	items, _ := session.ParseItems(`{"role":"user","content":"hi"}`)
	for _, bc := range []struct {
		name string
		wrap bool
	}{{"raw", false}, {"wrapped", true}} {
		b.Run(bc.name, func(b *testing.B) {
			inner, _ := memory.NewSession("bench")
			_ = inner.AddItems(ctx, items)
			var s session.Session = inner
			if bc.wrap {
				s = otelsession.Wrap(inner, otelsession.Options{Backend: "memory"})
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := session.Latest(ctx, s, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecording is the cost with a real SDK recording every span, for
// comparison with BenchmarkNoProvider.
func BenchmarkRecording(b *testing.B) {
	ctx := context.Background()
	items, _ := session.ParseItems(`{"role":"user","content":"hi"}`)
	tm := newTelemetry(false)
	inner, _ := memory.NewSession("bench")
	_ = inner.AddItems(ctx, items)
	s := otelsession.Wrap(inner, tm.opts)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := session.Latest(ctx, s, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGlobalProviderSetLater: a session wrapped before the program sets its
// global providers records once they are set.
func TestGlobalProviderSetLater(t *testing.T) {
	ctx := context.Background()
	inner, err := memory.NewSession("late")
	require.NoError(t, err)
	s := otelsession.Wrap(inner, otelsession.Options{})
	_, err = s.Items(ctx)
	require.NoError(t, err)
	tm := newTelemetry(false)
	otel.SetTracerProvider(tm.opts.TracerProvider)
	otel.SetMeterProvider(tm.opts.MeterProvider)
	_, err = s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, tm.spans.Ended(), 1, "only the call after the providers were set is traced")
	sums, _ := tm.sums(t)
	require.Contains(t, sums, "session.items.read")
}

func TestRunStateEvents(t *testing.T) {
	tm := newTelemetry(false)
	ctx, span := tm.opts.TracerProvider.Tracer("test").Start(context.Background(), "resume")
	ctx = runstate.WithObserver(ctx, otelsession.RunStateEvents)
	inner, err := memory.NewSession("s")
	require.NoError(t, err)
	s := otelsession.Wrap(inner, tm.opts)
	items, err := session.ParseItems(`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`, `{"type":"function_call_output","call_id":"c","output":"ok"}`)
	require.NoError(t, err)
	cp := runstate.New()
	cp.SetStep(runstate.StepInterruption)
	require.NoError(t, cp.Park(s, items, runstate.ParkOptions{}))
	cp.SetStep(runstate.StepRunAgain)
	_, err = cp.Resume(ctx, s)
	require.NoError(t, err)
	span.End()
	var names []string
	for _, sp := range tm.spans.Ended() {
		if sp.Name() == "resume" {
			for _, ev := range sp.Events() {
				names = append(names, ev.Name)
			}
		}
	}
	require.Equal(t, []string{"runstate.appended", "runstate.held-settled"}, names)
}
