package mongo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
)

// ckptDocs returns every document of the checkpoints collection for id,
// by version.
func ckptDocsOf(t *testing.T, st *Store, id string) []bson.M {
	t.Helper()
	cur, err := st.checkpoints.Find(context.Background(), bson.D{{Key: fSessionID, Value: id}},
		options.Find().SetSort(bson.D{{Key: fCkptName, Value: 1}, {Key: fCkptVersion, Value: 1}}))
	require.NoError(t, err)
	var out []bson.M
	require.NoError(t, cur.All(context.Background(), &out))
	return out
}

// TestCheckpointConcurrentCAS: 8 savers, each on its own client, create
// one checkpoint (version 0) and then load and save it at the loaded
// version, over and over. Every success gets a version no other success
// got, each from the version before it, and the final version is the
// number of successes: no update is lost, although FerretDB's conditional
// updates would lose them (the versions are inserts).
func TestCheckpointConcurrentCAS(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("ttl=%v", ttl), func(t *testing.T) {
			ctx := context.Background()
			st := newTestStore(t, Options{TTL: ttl})
			const savers, attempts = 8, 25
			handles := make([]*Session, savers)
			for i := range handles {
				other, err := New(newClient(t, nil), Options{Database: st.Database(), TTL: ttl})
				require.NoError(t, err)
				handles[i] = mustSession(t, other, "cas")
			}
			type success struct {
				from, to int64
				doc      string
			}
			var (
				mu        sync.Mutex
				successes []success
				conflicts int
				wg        sync.WaitGroup
			)
			for i, h := range handles {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var v int64 // every saver first tries to create it
					for a := range attempts {
						doc := fmt.Sprintf(`{"saver":%d,"attempt":%d}`, i, a)
						nv, err := h.SaveCheckpoint(ctx, "run", []byte(doc), v)
						mu.Lock()
						switch {
						case err == nil:
							successes = append(successes, success{v, nv, doc})
						case errors.Is(err, session.ErrCheckpointConflict):
							conflicts++
						default:
							t.Errorf("saver %d: %v", i, err)
						}
						mu.Unlock()
						_, v, err = h.LoadCheckpoint(ctx, "run")
						if err != nil {
							t.Errorf("saver %d: load: %v", i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			require.Equal(t, savers*attempts, len(successes)+conflicts)
			seen := map[int64]success{}
			for _, s := range successes {
				other, dup := seen[s.to]
				require.False(t, dup, "version %d returned to two saves (%s and %s)", s.to, other.doc, s.doc)
				seen[s.to] = s
				require.Equal(t, s.from+1, s.to, "a save returns the version after the one it saved from")
			}
			creates := 0
			for _, s := range successes {
				if s.from == 0 {
					creates++
				}
			}
			require.Equal(t, 1, creates, "exactly one create (version 0) succeeds")
			doc, v, err := mustSession(t, st, "cas").LoadCheckpoint(ctx, "run")
			require.NoError(t, err)
			require.Equal(t, int64(len(successes)), v, "the final version is the number of successes")
			require.Equal(t, seen[v].doc, string(doc), "the final document is the last success's")
			t.Logf("%d successes, %d conflicts", len(successes), conflicts)

			docs := ckptDocsOf(t, st, "cas")
			require.Len(t, docs, 1, "older versions are deleted, no pending version is left: %v", docs)
			require.NotContains(t, docs[0], fCkptPending)
		})
	}
}

// TestCheckpointLayout: one document per version in agent_checkpoints, its
// _id derived from the session id, the name and the version; the document
// is BSON binary; nothing is written to the Python SDK's collections.
func TestCheckpointLayout(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	st := newTestStore(t, Options{TTL: time.Hour, Now: clock.Now})
	s := mustSession(t, st, "a:b")
	v, err := s.SaveCheckpoint(ctx, "run:1", []byte(`{"n":1}`), 0)
	require.NoError(t, err)
	v, err = s.SaveCheckpoint(ctx, "run:1", []byte(`{"n":2}`), v)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	require.Equal(t, DefaultCheckpointsCollection, st.checkpoints.Name())
	docs := ckptDocsOf(t, st, "a:b")
	require.Len(t, docs, 1)
	d := docs[0]
	require.Equal(t, "3:a:b:run:1:2", d["_id"])
	require.Equal(t, "a:b", d[fSessionID])
	require.Equal(t, "run:1", d[fCkptName])
	require.Equal(t, int64(2), d[fCkptVersion])
	require.Equal(t, bson.Binary{Subtype: bson.TypeBinaryGeneric, Data: []byte(`{"n":2}`)}, d[fCkptDocument])
	require.Equal(t, clock.Now().UnixMilli(), d[fUpdatedAt].(bson.DateTime).Time().UnixMilli())
	require.Equal(t, clock.Now().Add(time.Hour).UnixMilli(), d[fExpiresAt].(bson.DateTime).Time().UnixMilli())
	require.Nil(t, rawOf(t, st).session("a:b"), "a save writes no session document")
	ids := map[string]bool{}
	for _, tc := range []struct {
		id, name string
		v        int64
	}{{"a", "b:c", 1}, {"a:b", "c", 1}, {"a", "b:c:1", 1}, {"a:b:c", "1", 1}, {"a", "b", 11}, {"a", "b:1", 1}} {
		k := ckptID(tc.id, tc.name, tc.v)
		require.False(t, ids[k], "%+v shares the _id %q", tc, k)
		ids[k] = true
	}
}

// TestCheckpointStaleSuccessor: a save from a version whose successor was
// already deleted as old gets its insert in, finds the newer committed
// version, deletes its own and conflicts; a version a crashed save left
// pending blocks saves until it is pendingTimeout old, and is then
// deleted.
func TestCheckpointStaleSuccessor(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	st := newTestStore(t, Options{Now: clock.Now})
	s := mustSession(t, st, "s")
	var v int64
	for i := range 3 {
		var err error
		v, err = s.SaveCheckpoint(ctx, "run", []byte(fmt.Sprintf(`{"n":%d}`, i)), v)
		require.NoError(t, err)
	}
	require.Len(t, ckptDocsOf(t, st, "s"), 1, "versions 1 and 2 are deleted")
	_, err := s.SaveCheckpoint(ctx, "run", []byte(`{"stale":1}`), 1)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	require.Contains(t, err.Error(), "at version 3, not 1")
	require.ErrorIs(t, s.DeleteCheckpoint(ctx, "run", 1), session.ErrCheckpointConflict)
	docs := ckptDocsOf(t, st, "s")
	require.Len(t, docs, 1, "the stale version 2 is gone again: %v", docs)
	require.Equal(t, int64(3), docs[0][fCkptVersion])

	// A save that crashed after its insert: version 4 pending.
	_, err = st.checkpoints.InsertOne(ctx, bson.D{
		{Key: "_id", Value: ckptID("s", "run", 4)}, {Key: fSessionID, Value: "s"}, {Key: fCkptName, Value: "run"},
		{Key: fCkptVersion, Value: int64(4)}, {Key: fCkptPending, Value: true},
		{Key: fCkptDocument, Value: bson.Binary{Data: []byte(`{"crashed":1}`)}}, {Key: fUpdatedAt, Value: clock.Now()},
	})
	require.NoError(t, err)
	doc, got, err := s.LoadCheckpoint(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, int64(3), got, "a pending version is not read")
	require.Equal(t, `{"n":2}`, string(doc))
	_, err = s.SaveCheckpoint(ctx, "run", []byte(`{"n":3}`), 3)
	require.ErrorIs(t, err, session.ErrCheckpointConflict, "a fresh pending version is a save in flight")
	clock.Advance(pendingTimeout)
	v, err = s.SaveCheckpoint(ctx, "run", []byte(`{"n":3}`), 3)
	require.NoError(t, err, "an abandoned pending version is deleted")
	require.Equal(t, int64(4), v)
	doc, got, err = s.LoadCheckpoint(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, int64(4), got)
	require.Equal(t, `{"n":3}`, string(doc))
}

// TestCheckpointsBesideTheSession: Clear and ReplaceItems keep the
// checkpoints, RemoveSession deletes them with the session's documents,
// and a delete leaves a tombstone that keeps the version counting.
func TestCheckpointsBesideTheSession(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "k")
	require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
	v, err := s.SaveCheckpoint(ctx, "run", []byte(`{"n":1}`), 0)
	require.NoError(t, err)
	require.NoError(t, s.Clear(ctx))
	require.NoError(t, s.ReplaceItems(ctx, numbered("r", 1)))
	doc, got, err := s.LoadCheckpoint(ctx, "run")
	require.NoError(t, err, "Clear and ReplaceItems keep the checkpoints")
	require.Equal(t, v, got)
	require.Equal(t, `{"n":1}`, string(doc))

	require.NoError(t, s.DeleteCheckpoint(ctx, "run", v))
	_, _, err = s.LoadCheckpoint(ctx, "run")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	names, err := s.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Empty(t, names)
	docs := ckptDocsOf(t, st, "k")
	require.Len(t, docs, 1)
	require.Equal(t, true, docs[0][fCkptDeleted], "a tombstone")
	require.NotContains(t, docs[0], fCkptDocument)
	v2, err := s.SaveCheckpoint(ctx, "run", []byte(`{"n":2}`), 0)
	require.NoError(t, err)
	require.Greater(t, v2, v+1, "created again after the tombstone's version")
	_, err = s.SaveCheckpoint(ctx, "run", []byte(`{"old":1}`), v)
	require.ErrorIs(t, err, session.ErrCheckpointConflict, "the version before the delete stays stale")

	require.NoError(t, st.RemoveSession(ctx, "k"))
	require.Empty(t, ckptDocsOf(t, st, "k"))
	require.Nil(t, rawOf(t, st).session("k"))
	require.Empty(t, rawOf(t, st).messageDocs("k"))
}

// TestCheckpointTTL, on the Store's clock: checkpoints expire with the
// session's data; a save restarts the session's expiry and an append the
// checkpoints'; a Clear of an expired session does not bring its
// checkpoints back; the write that restarts an expired session deletes
// them; ExpiresIn of a session holding only checkpoints is theirs.
func TestCheckpointTTL(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	const ttl = 10 * time.Minute
	st := newTestStore(t, Options{TTL: ttl, Now: clock.Now})

	t.Run("save and append refresh each other", func(t *testing.T) {
		s := mustSession(t, st, "refresh")
		require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
		clock.Advance(ttl / 2)
		v, err := s.SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
		require.NoError(t, err)
		d, ok, err := s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, ttl, d, "a save restarts the session's expiry")
		clock.Advance(ttl / 2)
		require.NoError(t, s.AddItems(ctx, numbered("b", 1)))
		clock.Advance(ttl/2 + time.Second)
		_, got, err := s.LoadCheckpoint(ctx, "run")
		require.NoError(t, err, "the append kept the checkpoint alive past its own expiry")
		require.Equal(t, v, got)
		names, err := s.ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"run"}, names)
		items, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, items, 3)
		clock.Advance(ttl)
		_, _, err = s.LoadCheckpoint(ctx, "run")
		require.ErrorIs(t, err, session.ErrNoCheckpoint, "expired with the session")
		_, err = s.SaveCheckpoint(ctx, "run", []byte(`{}`), v)
		require.ErrorIs(t, err, session.ErrCheckpointConflict)
		names, err = s.ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Empty(t, names)
	})

	t.Run("a clear of an expired session brings nothing back", func(t *testing.T) {
		s := mustSession(t, st, "clear")
		require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
		_, err := s.SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
		require.NoError(t, err)
		clock.Advance(ttl + time.Second)
		require.NoError(t, s.Clear(ctx))
		_, _, err = s.LoadCheckpoint(ctx, "run")
		require.ErrorIs(t, err, session.ErrNoCheckpoint, "the clear refreshed the session, not its expired checkpoints")
		require.Empty(t, ckptDocsOf(t, st, "clear"), "the restart deleted them")
		v, err := s.SaveCheckpoint(ctx, "run", []byte(`{"again":1}`), 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), v)
	})

	t.Run("a write restarting the session deletes the expired checkpoints", func(t *testing.T) {
		s := mustSession(t, st, "restart")
		require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
		_, err := s.SaveCheckpoint(ctx, "old", []byte(`{}`), 0)
		require.NoError(t, err)
		clock.Advance(ttl + time.Second)
		_, err = s.SaveCheckpoint(ctx, "new", []byte(`{}`), 0)
		require.NoError(t, err, "a save after the expiry (which restarts nothing)")
		require.NoError(t, s.AddItems(ctx, numbered("b", 1)))
		names, err := s.ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"new"}, names, "the checkpoint saved after the expiry survives the restart")
		docs := ckptDocsOf(t, st, "restart")
		require.Len(t, docs, 1)
		require.Equal(t, "new", docs[0][fCkptName])
	})

	t.Run("a session holding only checkpoints", func(t *testing.T) {
		s := mustSession(t, st, "only")
		_, ok, err := s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		_, err = s.SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
		require.NoError(t, err)
		d, ok, err := s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, ttl, d)
		require.Nil(t, rawOf(t, st).session("only"), "no session document is made")
		clock.Advance(ttl)
		_, _, err = s.LoadCheckpoint(ctx, "run")
		require.ErrorIs(t, err, session.ErrNoCheckpoint)
		_, ok, err = s.ExpiresIn(ctx)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, s.DeleteCheckpoint(ctx, "run", 0), "an expired checkpoint is not there")
	})
}

// TestCheckpointErrors: names and documents are checked before anything
// is sent; errors name the session and the checkpoint, never the document.
func TestCheckpointErrors(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "e")
	_, err := s.SaveCheckpoint(ctx, "", []byte(`{}`), 0)
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
	_, err = s.SaveCheckpoint(ctx, "\xff", []byte(`{}`), 0)
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
	_, err = s.SaveCheckpoint(ctx, "run", nil, 0)
	require.Error(t, err)
	_, err = s.SaveCheckpoint(ctx, "run", make([]byte, MaxDocumentBytes), 0)
	require.ErrorContains(t, err, "exceeds")
	_, _, err = s.LoadCheckpoint(ctx, "")
	require.ErrorIs(t, err, session.ErrInvalidSessionID)
	require.ErrorIs(t, s.DeleteCheckpoint(ctx, "", 0), session.ErrInvalidSessionID)
	require.Empty(t, ckptDocsOf(t, st, "e"), "nothing was written")

	_, err = s.SaveCheckpoint(ctx, "run", []byte(`{"secret":"s3cr3t"}`), 0)
	require.NoError(t, err)
	_, err = s.SaveCheckpoint(ctx, "run", []byte(`{"secret":"s3cr3t"}`), 0)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	for _, want := range []string{`"run"`, `"e"`, "at version 1, not 0"} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), "s3cr3t")
	_, err = s.SaveCheckpoint(ctx, "run", []byte(`{}`), -5)
	require.ErrorIs(t, err, session.ErrCheckpointConflict)
	_, _, err = s.LoadCheckpoint(ctx, "other")
	require.ErrorIs(t, err, session.ErrNoCheckpoint)
	require.True(t, strings.Contains(err.Error(), `"other"`) && strings.Contains(err.Error(), `"e"`), err.Error())

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.SaveCheckpoint(cctx, "run", []byte(`{}`), 1)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, st.Close(ctx))
	_, err = s.ListCheckpoints(ctx)
	require.ErrorIs(t, err, session.ErrClosed)
}

// TestCheckpointRoundTrips counts the commands of each checkpoint
// operation once the Store is warm.
func TestCheckpointRoundTrips(t *testing.T) {
	ctx := context.Background()
	st, log := loggedStore(t)
	s := mustSession(t, st, "rt")
	v, err := s.SaveCheckpoint(ctx, "warm", []byte(`{}`), 0)
	require.NoError(t, err)
	require.NoError(t, s.DeleteCheckpoint(ctx, "warm", v))
	log.take()
	const (
		find   = "find agent_checkpoints"
		insert = "insert agent_checkpoints"
		update = "update agent_checkpoints"
		del    = "delete agent_checkpoints"
	)
	for _, tc := range []struct {
		name string
		op   func() error
		want []string
	}{
		{"create", func() error { v, err = s.SaveCheckpoint(ctx, "run", []byte(`{}`), 0); return err }, []string{find, insert, find, update, del}},
		{"save from a version", func() error { v, err = s.SaveCheckpoint(ctx, "run", []byte(`{}`), v); return err }, []string{insert, find, update, del}},
		{"load", func() error { _, _, err := s.LoadCheckpoint(ctx, "run"); return err }, []string{find}},
		{"list", func() error { _, err := s.ListCheckpoints(ctx); return err }, []string{find}},
		{"stale save (its successor exists)", func() error {
			_, err := s.SaveCheckpoint(ctx, "run", []byte(`{}`), v-1)
			if !errors.Is(err, session.ErrCheckpointConflict) {
				return fmt.Errorf("want a conflict, got %v", err)
			}
			return nil
		}, []string{insert, find, find}},
		{"delete", func() error { return s.DeleteCheckpoint(ctx, "run", v) }, []string{insert, find, update, del}},
	} {
		require.NoError(t, tc.op(), tc.name)
		require.Equal(t, tc.want, log.take(), tc.name)
	}
}
