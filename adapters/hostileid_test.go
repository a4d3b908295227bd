package adapters_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// hostileIDBackends are every backend of pageBackends, and the Mongo
// adapter on FerretDB's PostgreSQL backend (testservers.FerretDBPostgres),
// whose jsonb holds no NUL and whose index entries hold some 2.7 kB: the
// adapter turns the server's refusal of such an id into an error wrapping
// session.ErrInvalidSessionID.
func hostileIDBackends() []storetest.Backend {
	return append(pageBackends(), storetest.Backend{Name: "mongo-ferretdb-postgresql", URL: func(t testing.TB) string {
		u, err := url.Parse(testservers.FerretDBPostgres(t))
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + storetest.Unique("st")
		return u.String()
	}})
}

// TestHostileIDsAreStoredOrTyped (issue 36 item 3): on every backend, a
// 1 MiB id (compressible or not) and ids holding NUL are either stored
// and read back as themselves, or refused with an error wrapping
// session.ErrInvalidSessionID; a refused id leaves nothing in the store.
func TestHostileIDsAreStoredOrTyped(t *testing.T) {
	var b [1 << 19]byte
	_, _ = rand.Read(b[:])
	ids := map[string]string{
		"1MiB-random": hex.EncodeToString(b[:]),
		"1MiB-same":   strings.Repeat("a", 1<<20),
		"nul":         "a\x00b",
		"nul-only":    "\x00",
		"1MiB-nul":    strings.Repeat("\x00", 1<<20),
	}
	for _, be := range hostileIDBackends() {
		if be.Name == "redis-cluster" {
			continue // one Redis suffices: the cluster's keys are the same
		}
		t.Run(be.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st, err := adapters.Open(ctx, be.URL(t))
			require.NoError(t, err)
			defer st.Close()
			for name, id := range ids {
				item := session.MustItem(`{"n":1}`)
				s, err := st.Session(id)
				if err == nil {
					err = s.AddItems(ctx, []session.Item{item})
				}
				if err != nil {
					if !errors.Is(err, session.ErrInvalidSessionID) {
						t.Errorf("%s: id %s: want an error wrapping ErrInvalidSessionID, got %.200v", be.Name, name, err)
						continue
					}
					if l, ok := st.(adapters.Lister); ok {
						listed, err := l.ListSessions(ctx)
						require.NoError(t, err)
						require.NotContains(t, listed, id, "%s: a refused id %s left a session", be.Name, name)
					}
					continue
				}
				got, err := s.Items(ctx)
				require.NoError(t, err, "%s: id %s", be.Name, name)
				require.Len(t, got, 1, "%s: id %s", be.Name, name)
				require.NoError(t, s.Clear(ctx))
			}
		})
	}
}
