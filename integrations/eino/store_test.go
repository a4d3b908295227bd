package eino_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/memory"
	einostore "github.com/agentsessions/sessions/integrations/eino"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// binaryDoc is every byte value: eino's checkpoints are gob, not JSON.
func binaryDoc(tag string) []byte {
	b := []byte(tag)
	for i := 0; i < 256; i++ {
		b = append(b, byte(i))
	}
	return b
}

// TestStoreOnEveryBackend: Get/Set/Delete's contract, the id mapping, and
// what the Store leaves alone (history, other checkpoint names), per
// backend.
func TestStoreOnEveryBackend(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := openBackend(t, b, b.URL(t))
			t.Cleanup(func() { _ = st.Close() })
			s, err := einostore.New(st, einostore.WithPrefix("eino/"))
			require.NoError(t, err)

			doc, ok, err := s.Get(ctx, "missing")
			require.NoError(t, err)
			require.False(t, ok)
			require.Nil(t, doc)

			// The checkpoint shares a session with history and another
			// framework's checkpoint; both are left alone.
			ss, err := st.Session("eino/cp-1")
			require.NoError(t, err)
			cs := ss.(session.CheckpointStore)
			hist, err := session.ParseItems(`{"role":"user","content":"hi"}`)
			require.NoError(t, err)
			require.NoError(t, ss.AddItems(ctx, hist))
			_, err = cs.SaveCheckpoint(ctx, "runstate", []byte(`{"other":true}`), 0)
			require.NoError(t, err)

			require.NoError(t, s.Set(ctx, "cp-1", binaryDoc("v1")))
			require.NoError(t, s.Set(ctx, "cp-1", binaryDoc("v2")), "Set overwrites: eino has no versions")
			doc, ok, err = s.Get(ctx, "cp-1")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, binaryDoc("v2"), doc)

			// Stored where the doc says: session prefix+id, name "eino".
			raw, version, err := cs.LoadCheckpoint(ctx, einostore.DefaultName)
			require.NoError(t, err)
			require.Equal(t, binaryDoc("v2"), raw)
			require.Equal(t, int64(2), version)
			require.Equal(t, "eino/cp-1", s.SessionID("cp-1"))

			// Another id is another session.
			_, ok, err = s.Get(ctx, "cp-2")
			require.NoError(t, err)
			require.False(t, ok)

			require.NoError(t, s.Delete(ctx, "cp-1"))
			require.NoError(t, s.Delete(ctx, "cp-1"), "deleting what is not there succeeds")
			_, ok, err = s.Get(ctx, "cp-1")
			require.NoError(t, err)
			require.False(t, ok)

			names, err := cs.ListCheckpoints(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"runstate"}, names)
			items, err := ss.Items(ctx)
			require.NoError(t, err)
			require.Len(t, items, 1)

			// WithSessionID and WithName.
			s2, err := einostore.New(st, einostore.WithSessionID(func(c string) string { return "tenant-7:" + strings.ToUpper(c) }), einostore.WithName("graph"))
			require.NoError(t, err)
			require.NoError(t, s2.Set(ctx, "abc", binaryDoc("g")))
			ss2, err := st.Session("tenant-7:ABC")
			require.NoError(t, err)
			raw, _, err = ss2.(session.CheckpointStore).LoadCheckpoint(ctx, "graph")
			require.NoError(t, err)
			require.Equal(t, binaryDoc("g"), raw)
			require.NoError(t, s2.Delete(ctx, "abc"))
		})
	}
}

// TestDeleteOnGet: a Get consumes the checkpoint; a checkpoint saved
// between the Get's load and its delete survives.
func TestDeleteOnGet(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			st := openBackend(t, b, b.URL(t))
			t.Cleanup(func() { _ = st.Close() })
			s, err := einostore.New(st, einostore.DeleteOnGet())
			require.NoError(t, err)
			require.NoError(t, s.Set(ctx, "cp", binaryDoc("1")))
			doc, ok, err := s.Get(ctx, "cp")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, binaryDoc("1"), doc)
			_, ok, err = s.Get(ctx, "cp")
			require.NoError(t, err)
			require.False(t, ok, "consumed by the first Get")

			// A save lands between the load and the delete.
			require.NoError(t, s.Set(ctx, "cp", binaryDoc("old")))
			racy := einostore.NewFunc(func(id string) (session.Session, error) {
				ss, err := st.Session(id)
				if err != nil {
					return nil, err
				}
				return &saveBeforeDelete{CheckpointStore: ss.(session.CheckpointStore), doc: binaryDoc("new")}, nil
			}, einostore.DeleteOnGet())
			doc, ok, err = racy.Get(ctx, "cp")
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, binaryDoc("old"), doc)
			doc, ok, err = s.Get(ctx, "cp")
			require.NoError(t, err)
			require.True(t, ok, "the newer checkpoint survives the older one's consumption")
			require.Equal(t, binaryDoc("new"), doc)
		})
	}
}

// saveBeforeDelete saves doc just before each delete, as another process
// interrupting again would.
type saveBeforeDelete struct {
	session.CheckpointStore
	doc []byte
}

func (s *saveBeforeDelete) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	if _, err := s.SaveCheckpoint(ctx, name, s.doc, session.AnyVersion); err != nil {
		return err
	}
	return s.CheckpointStore.DeleteCheckpoint(ctx, name, version)
}

// plainSession hides every capability of the session it wraps.
type plainSession struct{ session.Session }

func TestNoCheckpointCapability(t *testing.T) {
	ctx := context.Background()
	mem, err := adapters.Open(ctx, "memory://")
	require.NoError(t, err)
	defer mem.Close()
	plain, err := adapters.NewStore(func(id string) (plainSession, error) {
		s, err := mem.Session(id)
		return plainSession{s}, err
	}, func() error { return nil })
	require.NoError(t, err)

	_, err = einostore.New(plain)
	require.ErrorIs(t, err, einostore.ErrNoCheckpoints)
	t.Logf("New: %v", err)

	s := einostore.NewFunc(plain.Session)
	_, _, err = s.Get(ctx, "cp")
	require.ErrorIs(t, err, einostore.ErrNoCheckpoints)
	t.Logf("Get: %v", err)
	require.ErrorIs(t, s.Set(ctx, "cp", []byte("x")), einostore.ErrNoCheckpoints)
	require.ErrorIs(t, s.Delete(ctx, "cp"), einostore.ErrNoCheckpoints)

	_, err = einostore.New(nil)
	require.Error(t, err)
}

func withTTL(u string, ttl time.Duration) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "ttl=" + strconv.FormatInt(ttl.Milliseconds(), 10) + "ms"
}

// TestTTL: on a backend opened with ttl=, the checkpoint expires with its
// session, and each Set restarts the session's clock.
func TestTTL(t *testing.T) {
	ctx := context.Background()
	for _, b := range storetest.Backends() {
		if !b.TTL {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			minTTL := b.MinTTL
			if minTTL == 0 {
				minTTL = 50 * time.Millisecond
			}
			ttl := 4 * minTTL
			st := openBackend(t, b, withTTL(b.URL(t), ttl))
			t.Cleanup(func() { _ = st.Close() })
			s, err := einostore.New(st)
			require.NoError(t, err)

			require.NoError(t, s.Set(ctx, "cp", binaryDoc("1")))
			cs, err := s.Session("cp")
			require.NoError(t, err)
			ex, ok := cs.(session.Expirer)
			require.True(t, ok, "%s sessions expire", b.Name)
			left, ok, err := ex.ExpiresIn(ctx)
			require.NoError(t, err)
			require.True(t, ok, "a session holding only a checkpoint has an expiry")
			require.LessOrEqual(t, left, ttl)

			time.Sleep(ttl / 2)
			require.NoError(t, s.Set(ctx, "cp", binaryDoc("2")))
			left, ok, err = ex.ExpiresIn(ctx)
			require.NoError(t, err)
			require.True(t, ok)
			require.Greater(t, left, ttl/2+minTTL/2, "Set restarted the clock")

			deadline := time.Now().Add(ttl + 10*minTTL)
			for {
				_, ok, err = s.Get(ctx, "cp")
				require.NoError(t, err)
				if !ok || time.Now().After(deadline) {
					break
				}
				time.Sleep(minTTL / 2)
			}
			require.False(t, ok, "the checkpoint expired with its session")
			t.Logf("%s: ttl %v: expired", b.Name, ttl)
		})
	}
}
