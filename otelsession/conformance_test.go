package otelsession_test

import (
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/otelsession"
	"github.com/agentsessions/sessions/session"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// TestConformance runs the whole suite through the wrapper, recording, on
// every backend: capabilities pass through, so the capability clauses see
// the backend's own.
func TestConformance(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			w := otelsession.New(otelsession.Options{
				TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
				MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
				Backend:        b.Name,
			})
			wrap := func(s session.Session) (session.Session, error) { return w.Wrap(s), nil }
			rep := conformance.Run(t, storetest.NewHarness(t, b, wrap), storetest.Options(b))
			t.Logf("otelsession over %s (%d spans):\n%s", b.Name, len(rec.Ended()), rep.Summary())
			if len(rec.Ended()) == 0 {
				t.Error("no span recorded")
			}
			for _, p := range rep.Parts {
				if storetest.Graded(b, p.Name) && p.Level != conformance.LevelFull {
					t.Errorf("%s: part %s graded %s", b.Name, p.Name, p.Level)
				}
			}
		})
	}
}
