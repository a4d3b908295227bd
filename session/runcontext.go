package session

import "context"

type runContextKey struct{}

// runContextBox lets a masked context say "no run context" even when an
// outer context carries one.
type runContextBox struct{ v any }

// WithRunContext returns a copy of ctx carrying rc, the agent run's context
// object. The package-level functions hand it to sessions that accept it.
func WithRunContext(ctx context.Context, rc any) context.Context {
	return context.WithValue(ctx, runContextKey{}, runContextBox{v: rc})
}

// RunContext returns the run context carried by ctx. A RunContextAware
// session calls it inside its methods.
func RunContext(ctx context.Context) (any, bool) {
	b, ok := ctx.Value(runContextKey{}).(runContextBox)
	if !ok || b.v == nil {
		return nil, false
	}
	return b.v, true
}

// ContextFor returns the context to call s with: ctx itself when s accepts
// the run context, and otherwise ctx with the run context removed, so a
// session either sees the run context on every call or on none.
func ContextFor(ctx context.Context, s Session) context.Context {
	if acceptsRunContext(s) {
		return ctx
	}
	if _, ok := RunContext(ctx); !ok {
		return ctx
	}
	return context.WithValue(ctx, runContextKey{}, runContextBox{})
}

func acceptsRunContext(s Session) bool {
	a, ok := s.(RunContextAware)
	return ok && a.AcceptsRunContext()
}
