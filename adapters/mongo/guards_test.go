package mongo

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
)

// The FerretDB guards of doc.go ("# FerretDB"), each shown doing on
// MongoDB's semantics what the documentation says.

// TestGuardIndexRetry: guard "one index per command". The retry repeats
// only network errors (the driver's NetworkError label), at most twice,
// and passes every other outcome through at once; and creating the indexes
// again, from a second Store, changes nothing.
func TestGuardIndexRetry(t *testing.T) {
	ctx := context.Background()
	netErr := mongodrv.CommandError{Code: 6, Message: "connection reset", Labels: []string{"NetworkError"}}
	other := errors.New("not a network error")
	for _, tc := range []struct {
		name  string
		errs  []error
		calls int
		want  error
	}{
		{"success", []error{nil}, 1, nil},
		{"other error", []error{other}, 1, other},
		{"network error, then success", []error{netErr, nil}, 2, nil},
		{"network errors thrice", []error{netErr, netErr, netErr}, 3, netErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryNetwork(ctx, func() error {
				e := tc.errs[calls]
				calls++
				return e
			})
			require.Equal(t, tc.calls, calls)
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.Equal(t, tc.want, err, "the last error is returned as it is")
			}
		})
	}

	st := newTestStore(t, Options{})
	require.NoError(t, st.ensureIndexes(ctx))
	names := func() []string {
		cur, err := st.messages.Indexes().List(ctx)
		require.NoError(t, err)
		var specs []bson.M
		require.NoError(t, cur.All(ctx, &specs))
		var out []string
		for _, sp := range specs {
			out = append(out, sp["name"].(string))
		}
		return out
	}
	before := names()
	again, err := New(st.Client(), Options{Database: st.Database()})
	require.NoError(t, err)
	require.NoError(t, again.ensureIndexes(ctx))
	require.ElementsMatch(t, before, names(), "a second creation changes nothing")
}

// TestGuardLostInc: guard "lost $inc". On MongoDB's atomic $inc it fires
// only when another writer sets the counter back; it then keeps the
// handle's batches above everything it has seen, and no write of either
// language fails.
func TestGuardLostInc(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)

	t.Run("an older Python release's clear deletes the session document", func(t *testing.T) {
		g := mustSession(t, st, "reset")
		py := newPyMongo(t, st, "reset")
		require.NoError(t, g.AddItems(ctx, numbered("a", 3)))
		// clear_session of the per-item releases.
		_, err := st.messages.DeleteMany(ctx, bson.D{{Key: fSessionID, Value: "reset"}})
		require.NoError(t, err)
		_, err = st.sessions.DeleteOne(ctx, bson.D{{Key: fSessionID, Value: "reset"}})
		require.NoError(t, err)
		require.NoError(t, py.pyLegacyAdd([]string{`{"legacy":0}`}))

		require.NoError(t, g.AddItems(ctx, numbered("b", 2)), "the guard never fails a write")
		require.EqualValues(t, 5, r.session("reset")[fSeq], "the counter was pushed up to the handle's floor (3), then reserved")
		require.NoError(t, py.addItems([]string{`{"py":1}`}), "nor a Python write after it")
		want := append(append([]string{`{"legacy":0}`}, texts(numbered("b", 2))...), `{"py":1}`)
		got, err := g.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, want, texts(got))
		require.Equal(t, want, py.getItems(-1))
	})

	t.Run("a counter set back below documents the handle has read", func(t *testing.T) {
		g := mustSession(t, st, "back")
		py := newPyMongo(t, st, "back")
		require.NoError(t, py.addItems(texts(numbered("p", 4))))
		got, err := g.Items(ctx) // the handle has read seq 3
		require.NoError(t, err)
		require.Len(t, got, 4)
		_, err = st.sessions.UpdateOne(ctx, bson.D{{Key: fSessionID, Value: "back"}},
			bson.D{{Key: "$set", Value: bson.D{{Key: fSeq, Value: int64(1)}}}})
		require.NoError(t, err)
		require.NoError(t, g.AddItems(ctx, numbered("g", 1)))
		docs := r.messageDocs("back")
		require.EqualValues(t, 4, docs[len(docs)-1][fMsgSeq], "the batch lands above everything the handle saw")
		want := append(texts(numbered("p", 4)), texts(numbered("g", 1))...)
		got, err = g.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, want, texts(got))
		require.Equal(t, want, py.getItems(-1))
	})
}
