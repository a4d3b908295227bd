package mongo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
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
		require.EqualValues(t, 0, r.session("expire")[fGeneration], "generation 0, as the Python SDK's")
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
		require.EqualValues(t, 0, r.session("expire")[fGeneration], "in the same generation (Python reads only the current one)")
		docs := r.messageDocs("expire")
		require.Len(t, docs, 1, "the expired documents are deleted by the write that read them as expired")
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
		require.Contains(t, r.session("mixed"), fExpiredThrough, "but what the expiry hid stays hidden")
		got, err = p.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("n", 1)), texts(got))
	})

	t.Run("TTL indexes where the server has them", func(t *testing.T) {
		require.NoError(t, mustSession(t, st, "idx").Touch(ctx))
		if ferretDB() {
			require.Error(t, st.TTLIndexError(), "FerretDB v1 has no TTL indexes")
			return
		}
		require.NoError(t, st.TTLIndexError())
	})

	t.Run("Python's writes are never lost to an expiry", func(t *testing.T) {
		// Python's MongoDBSession has no TTL: it stamps nothing, and
		// refreshes no expiry. Go hides only stamped documents.
		s := mustSession(t, st, "shared")
		py := newPyMongo(t, st, "shared")
		require.NoError(t, s.AddItems(ctx, numbered("g", 2)))
		require.NoError(t, py.addItems([]string{`{"py":"before"}`}))
		clock.Advance(ttl + time.Second)

		// In between: Go hides its own (stamped, about to be purged) items;
		// Python still reads them until the TTL monitor (MongoDB) or the
		// next Go write (every server) deletes them.
		require.NoError(t, py.addItems([]string{`{"py":"after"}`}))
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{`{"py":"before"}`, `{"py":"after"}`}, texts(got), "Go hides only what an expiry will delete")
		sd := r.session("shared")
		var hidden int
		for _, d := range r.messageDocs("shared") {
			exp, stamped := d[fExpiresAt].(bson.DateTime)
			raw, err := bson.Marshal(d)
			require.NoError(t, err)
			md, err := parseMessageDoc(raw)
			require.NoError(t, err)
			var sdoc sessionDoc
			sraw, _ := bson.Marshal(sd)
			require.NoError(t, bson.Unmarshal(sraw, &sdoc))
			if sdoc.hides(&md, clock.Now()) {
				hidden++
				require.True(t, stamped, "a hidden document carries the date a TTL index deletes it at")
				require.False(t, exp.Time().After(sdoc.ExpiresAt.Add(st.opts.messageSlack())),
					"and that date is at most the slack after the session's expiry")
			}
		}
		require.Equal(t, 1, hidden, "Go's batch is hidden, nothing else")
		if ferretDB() {
			require.Equal(t, append(texts(numbered("g", 2)), `{"py":"before"}`, `{"py":"after"}`), py.getItems(-1),
				"without TTL indexes Python reads the expired batch until the next Go write")
		}

		// A Go write after the expiry deletes exactly what it read as
		// expired, and keeps Python's items.
		require.NoError(t, s.AddItems(ctx, numbered("h", 1)))
		want := append([]string{`{"py":"before"}`, `{"py":"after"}`}, texts(numbered("h", 1))...)
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, want, texts(got))
		require.Equal(t, want, py.getItems(-1), "both sides agree again")

		// The write stamped Python's items: they now live and expire with
		// the session, as a whole.
		for _, d := range r.messageDocs("shared") {
			require.IsType(t, bson.DateTime(0), d[fExpiresAt], "every document is stamped after a Go write")
		}
		clock.Advance(ttl / 2)
		require.NoError(t, py.addItems([]string{`{"py":"late"}`}))
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, append(want, `{"py":"late"}`), texts(got))
		clock.Advance(ttl)
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{`{"py":"late"}`}, texts(got), "the unstamped item written after the last Go write is never hidden")
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, `{"py":"late"}`, it.String())
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, got, "what was hidden stays hidden after the pop")
		require.NoError(t, s.AddItems(ctx, numbered("k", 1)))
		got, err = s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("k", 1)), texts(got), "and after the next write")
		require.Equal(t, texts(numbered("k", 1)), py.getItems(-1), "which deleted what it hid")
	})
}
