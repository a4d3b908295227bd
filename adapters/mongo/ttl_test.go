package mongo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/internal/testservers"
)

func TestTTL(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	const ttl = 10 * time.Minute
	st := newTestStore(t, Options{TTL: ttl, Now: clock.Now})
	r := rawOf(t, st)

	t.Run("the whole session expires at once, then starts afresh", func(t *testing.T) {
		s := mustSession(t, st, "expire")
		require.NoError(t, s.AddItems(ctx, numbered("a", 3)))
		require.NoError(t, s.AddItems(ctx, numbered("b", 2)))
		gen := r.session("expire")[fGeneration].(int64)
		require.GreaterOrEqual(t, gen, int64(1)<<40, "a TTL store starts sessions at a random generation")
		d, ok, err := s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, ttl, d)

		clock.Advance(ttl)
		for _, n := range []int{-1, 1, 5} {
			got, err := s.read(ctx, n)
			require.NoError(t, err)
			require.Empty(t, got, "expired: nothing to read")
		}
		_, ok, err = s.PopItem(ctx)
		require.NoError(t, err)
		require.False(t, ok, "expired: nothing to pop")
		_, ok, err = s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, s.Touch(ctx), "touching an expired session does not revive it")
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, got)

		require.NoError(t, s.AddItems(ctx, numbered("c", 1)))
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("c", 1)), texts(got), "a write after expiry starts a new history")
		require.Equal(t, gen+1, r.session("expire")[fGeneration], "by a new generation")
		for _, doc := range r.messageDocs("expire") {
			require.Equal(t, gen+1, doc[fMsgGeneration], "and the old generation's documents are gone")
		}
	})

	t.Run("message documents never expire before their session", func(t *testing.T) {
		s := mustSession(t, st, "purge")
		check := func() {
			t.Helper()
			sd := r.session("purge")
			exp := sd[fExpiresAt].(bson.DateTime).Time()
			bound := sd[fMessagesExpireAt].(bson.DateTime).Time()
			require.False(t, bound.Before(exp), "the recorded bound covers the session's expiry")
			for _, d := range r.messageDocs("purge") {
				mexp := d[fExpiresAt].(bson.DateTime).Time()
				require.False(t, mexp.Before(exp), "message seq %v purges at %v, before its session expires at %v", d[fMsgSeq], mexp, exp)
				require.False(t, mexp.Before(bound), "the bound is a lower bound")
			}
		}
		require.NoError(t, s.AddItems(ctx, numbered("p", 2)))
		check()
		for range 6 {
			clock.Advance(ttl / 2)
			require.NoError(t, s.AddItems(ctx, numbered("q", 1)))
			check()
			clock.Advance(ttl / 3)
			_, _, err := s.PopItem(ctx)
			require.NoError(t, err)
			check()
			clock.Advance(ttl / 3)
			require.NoError(t, s.Touch(ctx))
			check()
		}
		require.NoError(t, s.ReplaceItems(ctx, numbered("r", 2)))
		check()
		require.NoError(t, s.Clear(ctx))
		check()
	})

	t.Run("a store without a TTL honours an expiry and drops it on restart", func(t *testing.T) {
		s := mustSession(t, st, "mixed")
		require.NoError(t, s.AddItems(ctx, numbered("m", 2)))
		plain, err := New(st.Client(), Options{Database: st.Database(), Now: clock.Now})
		require.NoError(t, err)
		p := mustSession(t, plain, "mixed")
		got, err := p.Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 2)
		clock.Advance(ttl + time.Second)
		got, err = p.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, got, "expired for every store")
		require.NoError(t, p.AddItems(ctx, numbered("n", 1)))
		require.NotContains(t, r.session("mixed"), fExpiresAt, "restarted by a store without a TTL: no expiry any more")
		got, err = p.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("n", 1)), texts(got))
	})

	t.Run("TTL indexes where the server has them", func(t *testing.T) {
		require.NoError(t, mustSession(t, st, "idx").Touch(ctx))
		if testservers.MongoKind() == testservers.KindFerretDBSQLite {
			require.Error(t, st.TTLIndexError(), "FerretDB v1 has no TTL indexes")
			return
		}
		require.NoError(t, st.TTLIndexError())
	})
}
