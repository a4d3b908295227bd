package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// aclUser is a Redis user made for one test on every node of a
// deployment, deleted at cleanup, and a client that authenticates as it.
type aclUser struct {
	admin  goredis.UniversalClient
	name   string
	client goredis.UniversalClient
}

// newACLUser makes a user with every permission and a client of it, on
// the standalone server or the cluster (dep).
func newACLUser(t *testing.T, dep string) *aclUser {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	u := &aclUser{name: "agents-test-" + hex.EncodeToString(b[:]), admin: bothClients[dep](t)}
	u.set(t, "on", ">pw", "~*", "&*", "+@all")
	t.Cleanup(func() { u.set(t, "reset", "off") })
	if dep == "cluster" {
		u.client = goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: testservers.RedisCluster(t), Username: u.name, Password: "pw",
		})
	} else {
		o, err := goredis.ParseURL(testservers.Redis(t))
		require.NoError(t, err)
		o.Username, o.Password = u.name, "pw"
		u.client = goredis.NewClient(o)
	}
	t.Cleanup(func() { _ = u.client.Close() })
	return u
}

// set runs ACL SETUSER with rules on every node. It applies at once to
// the connections already authenticated as the user.
func (u *aclUser) set(t *testing.T, rules ...string) {
	t.Helper()
	ctx := context.Background()
	args := append([]any{"acl", "setuser", u.name}, toAny(rules)...)
	if cc, ok := u.admin.(*goredis.ClusterClient); ok {
		require.NoError(t, cc.ForEachShard(ctx, func(ctx context.Context, c *goredis.Client) error {
			return c.Do(ctx, args...).Err()
		}))
		return
	}
	require.NoError(t, u.admin.Do(ctx, args...).Err())
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestMultiRefused: a server that refuses MULTI itself (here an ACL that
// denies it) still runs the commands sent after it, one by one, so every
// write sent as a transaction reports ErrOutcomeUnknown then, never a
// plain error: the fenced commit, the held commit, an append with a TTL
// and RemoveSession. Each of them did write. A command refused when
// queued (EXECABORT: nothing ran) stays a plain error.
func TestMultiRefused(t *testing.T) {
	ctx := context.Background()
	for _, dep := range []string{"standalone", "cluster"} {
		t.Run(dep, func(t *testing.T) {
			u := newACLUser(t, dep)
			prefix := uniquePrefix(t)
			admin := newStore(t, u.admin, Options{KeyPrefix: prefix})
			st := newStore(t, u.client, Options{KeyPrefix: prefix})
			ttl := newStore(t, u.client, Options{KeyPrefix: prefix, TTL: time.Hour})
			view := func(id string) *Session {
				s, err := admin.Session(id)
				require.NoError(t, err)
				return s
			}

			// Armed while MULTI is allowed; the next commit is held.
			held, hv := heldSession(t, st, "held")

			u.set(t, "-multi")
			t.Run("fenced commit", func(t *testing.T) {
				s, err := st.Session("fenced")
				require.NoError(t, err)
				require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 1)))
				_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 1), "run", []byte(`{"n":1}`), 0)
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				require.Contains(t, err.Error(), "NOPERM")
				require.Equal(t, []string{"a-0", "b-0"}, contents(t, view("fenced")), "the RPUSH ran")
			})
			t.Run("held commit", func(t *testing.T) {
				before := contents(t, view("held"))
				_, err := held.AppendWithCheckpoint(ctx, conformance.Numbered("c", 1), "run", []byte(`{"n":2}`), hv)
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				requireHeld(t, held, false)
				require.Equal(t, append(before, "c-0"), contents(t, view("held")), "the RPUSH ran")
			})
			t.Run("append with a TTL", func(t *testing.T) {
				require.NoError(t, view("ttl").AddItems(ctx, conformance.Numbered("a", 1)))
				s, err := ttl.Session("ttl")
				require.NoError(t, err)
				err = s.AddItems(ctx, conformance.Numbered("b", 1))
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				require.Equal(t, []string{"a-0", "b-0"}, contents(t, view("ttl")), "the RPUSHX ran")
			})
			t.Run("RemoveSession", func(t *testing.T) {
				require.NoError(t, view("gone").AddItems(ctx, conformance.Numbered("a", 1)))
				err := st.RemoveSession(ctx, "gone")
				require.ErrorIs(t, err, session.ErrOutcomeUnknown)
				require.Empty(t, contents(t, view("gone")), "the DEL ran")
			})

			u.set(t, "+multi", "-rpush")
			t.Run("a command refused when queued", func(t *testing.T) {
				require.NoError(t, view("queued").AddItems(ctx, conformance.Numbered("a", 1)))
				s, err := st.Session("queued")
				require.NoError(t, err)
				require.NoError(t, s.AddItems(ctx, conformance.Numbered("a", 1))) // RPUSHX
				_, err = s.AppendWithCheckpoint(ctx, conformance.Numbered("b", 1), "run", []byte(`{"n":1}`), 0)
				require.Error(t, err)
				require.NotErrorIs(t, err, session.ErrOutcomeUnknown)
				require.Contains(t, err.Error(), "'rpush'")
				require.Equal(t, []string{"a-0", "a-0"}, contents(t, view("queued")), "nothing ran")
				_, v, err := view("queued").LoadCheckpoint(ctx, "run")
				require.ErrorIs(t, err, session.ErrNoCheckpoint)
				require.Zero(t, v)
			})
			for _, id := range []string{"fenced", "ttl", "gone", "queued"} {
				_ = admin.RemoveSession(ctx, id)
			}
		})
	}
}
