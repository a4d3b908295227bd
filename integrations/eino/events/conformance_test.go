package events_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/adk"
	einosession "github.com/cloudwego/eino/adk/session"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/integrations/eino/events"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// conformanceCases is the number of cases eino v0.10.0-alpha.12's
// RunConformanceTests runs (its t.Run calls); each opens one store.
const conformanceCases = 14

// tally counts eino's conformance cases as they finish: each case calls the
// factory once, and the factory's cleanup runs when the case has ended.
type tally struct {
	mu                    sync.Mutex
	passed, failed, skips []string
}

func (c *tally) watch(tb testing.TB) {
	tb.Cleanup(func() {
		name := tb.Name()
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case tb.Skipped():
			c.skips = append(c.skips, name)
		case tb.Failed():
			c.failed = append(c.failed, name)
		default:
			c.passed = append(c.passed, name)
		}
	})
}

func (c *tally) report(t *testing.T, what string, want int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	total := len(c.passed) + len(c.failed) + len(c.skips)
	t.Logf("eino conformance %s: %d/%d passed (%d failed, %d skipped)", what, len(c.passed), total, len(c.failed), len(c.skips))
	sort.Strings(c.failed)
	require.Empty(t, c.failed, "failed cases")
	if total > 0 && len(c.skips) == total {
		t.Skipf("eino conformance %s: skipped, the backend did not start", what)
	}
	require.Empty(t, c.skips, "skipped cases are not passes")
	require.Equal(t, want, total, "cases run (did the suite change?)")
}

// variant is how a backend's sessions are handed to the Store.
type variant struct {
	name string
	wrap func(session.Session) (session.Session, error)
}

var (
	native = variant{name: "native"}
	// plain hides every capability: ReadSince reads the whole history
	// (session.ReadSince's fallback) and AppendEvents appends with
	// session.Append after its check (AppendOnce is ErrUnsupported).
	plain = variant{name: "no capabilities", wrap: func(s session.Session) (session.Session, error) {
		return plainSession{s}, nil
	}}
	sealed = variant{name: "encrypted", wrap: func(s session.Session) (session.Session, error) {
		return encrypted.New(s, encrypted.Options{Keys: []encrypted.Key{{Secret: "eino-events-test-key"}}})
	}}
)

type plainSession struct{ session.Session }

// factory returns eino's store factory over backend b: every call opens a
// fresh store of b (a new SQLite file, a new key prefix, new tables).
func factory[M adk.MessageType](b storetest.Backend, v variant, c *tally, ser schema.Serializer) func(testing.TB) *events.Store[M] {
	return func(tb testing.TB) *events.Store[M] {
		c.watch(tb)
		st, err := adapters.Open(context.Background(), b.URL(tb))
		if err != nil {
			tb.Fatalf("open %s: %v", b.Name, err)
		}
		tb.Cleanup(func() { _ = st.Close() })
		open := st.Session
		if v.wrap != nil {
			open = func(id string) (session.Session, error) {
				s, err := st.Session(id)
				if err != nil {
					return nil, err
				}
				return v.wrap(s)
			}
		}
		return events.NewFunc[M](open, events.Options{Prefix: "eino-events:", Serializer: ser})
	}
}

func runConformance[M adk.MessageType](t *testing.T, b storetest.Backend, v variant, makeMessage func(string) M) {
	what := typeName[M]() + " on " + b.Name + " (" + v.name + ")"
	c := &tally{}
	f := factory[M](b, v, c, nil)
	einosession.RunConformanceTests[M](t, func(tb testing.TB) adk.SessionEventStore[M] { return f(tb) }, makeMessage)
	c.report(t, what, conformanceCases)

	s := &tally{}
	einosession.RunSerializerConformanceTests[M](t, func(tb testing.TB, ser schema.Serializer) adk.SessionEventStore[M] {
		return factory[M](b, v, s, ser)(tb)
	}, makeMessage)
	s.report(t, what+", serializer suite", 1)
}

func typeName[M adk.MessageType]() string {
	var m M
	switch any(m).(type) {
	case *schema.Message:
		return "*schema.Message"
	default:
		return "*schema.AgenticMessage"
	}
}

// TestEinoConformance runs eino's own SessionEventStore suite
// (adk/session.RunConformanceTests and RunSerializerConformanceTests) for
// both message types on every backend (Redis in both layouts); on memory
// and SQLite also with every capability hidden (the fallbacks) and through
// encrypted sessions.
func TestEinoConformance(t *testing.T) {
	defer func() {
		t.Logf("servers: redis %q, redis-cluster %q, mongo %q, postgres %q",
			testservers.RedisKind(), testservers.RedisClusterKind(), testservers.MongoKind(), testservers.PostgresKind())
	}()
	for _, b := range storetest.Backends() {
		variants := []variant{native}
		if b.Name == "memory" || b.Name == "sqlite" {
			variants = append(variants, plain, sealed)
		}
		if b.Name == "redis" {
			// The Python layout (RedisSession's keys): no session.Follower,
			// so ReadSince reads the whole history there.
			py := b
			py.Name, py.URL = "redis-python-layout", func(tb testing.TB) string { return b.URL(tb) + "&layout=python" }
			runBackend(t, py, []variant{native})
		}
		runBackend(t, b, variants)
	}
}

func runBackend(t *testing.T, b storetest.Backend, variants []variant) {
	for _, v := range variants {
		name := b.Name + "/" + strings.ReplaceAll(v.name, " ", "-")
		t.Run(name+"/Message", func(t *testing.T) {
			runConformance(t, b, v, func(s string) *schema.Message { return schema.UserMessage(s) })
		})
		t.Run(name+"/AgenticMessage", func(t *testing.T) {
			runConformance(t, b, v, func(s string) *schema.AgenticMessage { return schema.UserAgenticMessage(s) })
		})
	}
}
