package mongo

import (
	"bytes"
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// carryingAll matches a request that holds every one of parts.
func carryingAll(parts ...string) func([]byte) bool {
	return func(req []byte) bool {
		for _, p := range parts {
			if !bytes.Contains(req, []byte(p)) {
				return false
			}
		}
		return true
	}
}

// TestCommitOutcomeUnknown loses the reply of each commit (the update of
// the session document that makes an append, a pop or a clear take
// effect) or cuts the request carrying it: the server may have applied
// it, so the caller gets session.ErrOutcomeUnknown.
func TestCommitOutcomeUnknown(t *testing.T) {
	for _, fault := range []struct {
		name string
		f    faultproxy.Fault
	}{{"lost-reply", faultproxy.LoseReply}, {"cut-request", faultproxy.CutRequest}} {
		t.Run(fault.name, func(t *testing.T) {
			u, err := url.Parse(testservers.Mongo(t))
			require.NoError(t, err)
			proxy, err := faultproxy.Start(u.Host)
			require.NoError(t, err)
			t.Cleanup(func() { _ = proxy.Close() })
			u.Host = proxy.Addr()
			c, err := mongodrv.Connect(options.Client().ApplyURI(u.String()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
			db := uniqueDB(t)
			dropOnCleanup(t, c, db)
			st, err := New(c, Options{Database: db})
			require.NoError(t, err)
			s := mustSession(t, st, "s")
			ctx := context.Background()
			require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"v":0}`)}))

			testHookAfterReserve = func(h *Session, _ int64) {
				if h == s {
					proxy.Once(fault.f, carryingAll(fTop, "$unset"))
				}
			}
			t.Cleanup(func() { testHookAfterReserve = nil })
			err = s.AddItems(ctx, []session.Item{session.MustItem(`{"v":1}`)})
			testHookAfterReserve = nil
			require.EqualValues(t, 1, proxy.Injected.Load())
			require.ErrorIs(t, err, session.ErrOutcomeUnknown, "append")

			proxy.Once(fault.f, carryingAll(fPops, "$inc"))
			_, _, err = s.PopItem(ctx)
			require.EqualValues(t, 2, proxy.Injected.Load())
			require.ErrorIs(t, err, session.ErrOutcomeUnknown, "pop")

			proxy.Once(fault.f, carryingAll(fGeneration, "$inc"))
			err = s.Clear(ctx)
			require.EqualValues(t, 3, proxy.Injected.Load())
			require.ErrorIs(t, err, session.ErrOutcomeUnknown, "clear")
		})
	}
}
