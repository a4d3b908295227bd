package events_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/integrations/eino/events"
	"github.com/agentsessions/sessions/session"
)

// BenchmarkTurn is one turn's store traffic on an SQLite session of n
// events: append an event, then read the newest page of messages (as the
// Runner's reconstruction starts). native follows the session from a
// cursor; "no capabilities" is ReadSince's fallback, which reads the
// whole history each call.
func BenchmarkTurn(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		for _, v := range []variant{native, plain} {
			b.Run(fmt.Sprintf("%s/%d", v.name, n), func(b *testing.B) {
				st, err := adapters.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "s.db"))
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
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
				store := events.NewFunc[*schema.Message](open, events.Options{})
				for i := 0; i < n; i += 500 {
					batch := make([]*adk.SessionEvent[*schema.Message], 500)
					for j := range batch {
						batch[j] = msgEvent(fmt.Sprintf("e%d", i+j), "some words of a conversation")
					}
					if err := store.AppendEvents(ctx, "s", batch); err != nil {
						b.Fatal(err)
					}
				}
				req := &adk.LoadSessionEventsRequest{Reverse: true, Limit: 100, Kinds: []adk.SessionEventKind{adk.SessionEventMessage}}
				if _, err := store.LoadEvents(ctx, "s", req); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := range b.N {
					if err := store.AppendEvents(ctx, "s", []*adk.SessionEvent[*schema.Message]{msgEvent(fmt.Sprint("t", i), "next")}); err != nil {
						b.Fatal(err)
					}
					if _, err := store.LoadEvents(ctx, "s", req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
