package otelsession_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/otelsession"
	"github.com/agentsessions/sessions/session"
)

// Wrap a session once, where it is opened; every operation is then a span
// (and a metric) with the backend and a hash of the session id.
func ExampleWrap() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder() // a program sets its exporter here
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(ctx)

	inner, _ := memory.NewSession("conversation-42")
	s := otelsession.Wrap(inner, otelsession.Options{TracerProvider: tp, Backend: "memory"})
	_ = session.Append(ctx, s, []session.Item{session.MustItem(`{"role":"user","content":"hi"}`)})
	_, _ = session.Latest(ctx, s, 10)

	for _, sp := range spans.Ended() {
		fmt.Println(sp.Name())
	}
	fmt.Println("capabilities kept:", session.Probe(s) == session.Probe(inner))
	// Output:
	// session.add_items
	// session.latest
	// capabilities kept: true
}
