package adapters

import (
	"context"
	"net/url"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/session"
)

func init() {
	register("memory", opener{options: []string{"ttl"}, open: openMemory})
}

// openMemory opens memory:// with an optional ttl=<duration>.
func openMemory(_ context.Context, _ *url.URL, q url.Values, o Options) (Store, error) {
	ttl, err := durationOption(q, "ttl")
	if err != nil {
		return nil, err
	}
	st := memory.New(memory.Options{TTL: ttl, OnCorrupt: o.OnCorrupt})
	return &memoryStore{sessionStore[*memory.Session]{
		session:  st.Session,
		declared: session.Caps(session.CapLatest, session.CapReplace, session.CapTTL),
	}, st}, nil
}

type memoryStore struct {
	sessionStore[*memory.Session]
	st *memory.Store
}

// ListSessions lists the store's sessions.
func (m *memoryStore) ListSessions(ctx context.Context) ([]string, error) {
	return m.st.ListSessions(ctx)
}
