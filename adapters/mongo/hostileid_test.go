package mongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// hostileIDs are ids FerretDB on PostgreSQL cannot store: holding NUL
// (its jsonb refuses \u0000, even in a filter), or too long for an index
// entry (some 2.7 kB, after compression).
func hostileIDs() map[string]string {
	var b [1 << 19]byte
	_, _ = rand.Read(b[:])
	return map[string]string{
		"1MiB-random": hex.EncodeToString(b[:]),
		"1MiB-same":   strings.Repeat("a", 1<<20),
		"3kB-random":  hex.EncodeToString(b[:1500]),
		"nul":         "a\x00b",
		"nul-only":    "\x00",
		"1MiB-nul":    strings.Repeat("\x00", 1<<20),
	}
}

// TestHostileIDsTypedOnFerretDBPostgres: on FerretDB's PostgreSQL backend,
// every call on a session whose id (or checkpoint name) the server cannot
// store succeeds or fails with an error wrapping
// session.ErrInvalidSessionID, never with the server's untyped error
// alone; and a listing under a deadline still works (FerretDB refuses
// maxTimeMS on distinct).
func TestHostileIDsTypedOnFerretDBPostgres(t *testing.T) {
	uri := testservers.FerretDBPostgres(t)
	c, err := mongodrv.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	db := uniqueDB(t)
	dropOnCleanup(t, c, db)
	st, err := New(c, Options{Database: db})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	typed := func(what string, err error) {
		t.Helper()
		if err != nil && !errors.Is(err, session.ErrInvalidSessionID) && !errors.Is(err, session.ErrNoCheckpoint) {
			t.Errorf("%s: want nil or an error wrapping ErrInvalidSessionID, got %.300v", what, err)
		}
	}
	item := []session.Item{session.MustItem(`{"n":1}`)}
	refused := 0
	for name, id := range hostileIDs() {
		s := mustSession(t, st, id)
		err := s.AddItems(ctx, item)
		typed(name+" AddItems", err)
		if err != nil {
			refused++
		}
		_, err = s.AddItemsOnce(ctx, "op", item)
		typed(name+" AddItemsOnce", err)
		_, err = s.Items(ctx)
		typed(name+" Items", err)
		_, err = s.LatestItems(ctx, 1)
		typed(name+" LatestItems", err)
		_, _, err = s.ItemsSince(ctx, "")
		typed(name+" ItemsSince", err)
		_, _, err = s.PopItem(ctx)
		typed(name+" PopItem", err)
		typed(name+" ReplaceItems", s.ReplaceItems(ctx, item))
		_, err = s.SaveCheckpoint(ctx, "ck", []byte(`{}`), session.AnyVersion)
		typed(name+" SaveCheckpoint", err)
		_, _, err = s.LoadCheckpoint(ctx, "ck")
		typed(name+" LoadCheckpoint", err)
		_, err = s.ListCheckpoints(ctx)
		typed(name+" ListCheckpoints", err)
		typed(name+" DeleteCheckpoint", s.DeleteCheckpoint(ctx, "ck", session.AnyVersion))
		_, _, err = s.ExpiresIn(ctx)
		typed(name+" ExpiresIn", err)
		typed(name+" Clear", s.Clear(ctx))
		typed(name+" RemoveSession", st.RemoveSession(ctx, id))
	}
	require.Equal(t, len(hostileIDs()), refused, "FerretDB on PostgreSQL stored an id it is known to refuse")

	// A checkpoint name the server cannot store, on an ordinary id.
	s := mustSession(t, st, "plain")
	for name, ck := range map[string]string{"nul": "a\x00b", "3kB-random": hostileIDs()["3kB-random"]} {
		_, err := s.SaveCheckpoint(ctx, ck, []byte(`{}`), session.AnyVersion)
		require.ErrorIs(t, err, session.ErrInvalidSessionID, "checkpoint name %s", name)
		_, _, err = s.LoadCheckpoint(ctx, ck)
		typed("checkpoint name "+name+" LoadCheckpoint", err)
		typed("checkpoint name "+name+" DeleteCheckpoint", s.DeleteCheckpoint(ctx, ck, session.AnyVersion))
	}

	// An ordinary id is untouched, and the listing (a deadline on ctx)
	// holds it and none of the refused ids.
	require.NoError(t, s.AddItems(ctx, item))
	u := &urlStore{st: st}
	listed, err := u.ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"plain"}, listed)
}

// TestListSessionsUnderDeadline: listing with a deadline on the context
// (the driver then sends maxTimeMS) works on the test server too, as
// without one; FerretDB v1 refuses maxTimeMS on distinct.
func TestListSessionsUnderDeadline(t *testing.T) {
	st := newTestStore(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range []string{"b", "a", "c"} {
		require.NoError(t, mustSession(t, st, id).AddItems(ctx, numbered(id, 1)))
	}
	_, err := mustSession(t, st, "d").SaveCheckpoint(ctx, "ck", []byte(`{}`), 0)
	require.NoError(t, err)
	u := &urlStore{st: st}
	listed, err := u.ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d"}, listed)
	plain, err := u.ListSessions(context.Background())
	require.NoError(t, err)
	require.Equal(t, listed, plain)
	sums, err := st.SummarizeSessions(ctx, []string{"a", "d"}, nil)
	require.NoError(t, err)
	require.Len(t, sums, 2)
}

// TestRefusedIDIsNarrow: only a server's error reply naming PostgreSQL's
// refusal of NUL, for an id or name holding NUL, or of an index entry too
// large, for an id and name of at least minUnindexableKey bytes, becomes
// an error wrapping session.ErrInvalidSessionID; a network error, a
// timeout, an outcome unknown or a write concern error never does.
func TestRefusedIDIsNarrow(t *testing.T) {
	nulReply := mongodrv.CommandError{Code: 1, Name: "InternalError",
		Message: "[query_iterator.go:92 postgresql.(*queryIterator).Next] ERROR: unsupported Unicode escape sequence (SQLSTATE 22P05)"}
	bigReply := mongodrv.CommandError{Code: 1, Name: "InternalError",
		Message: "[collection.go:163 postgresql.(*collection).InsertAll.func1] ERROR: index row requires 1048600 bytes, maximum size is 8191 (SQLSTATE 54000)"}
	long := strings.Repeat("a", minUnindexableKey)
	wrap := func(err error) error { return fmt.Errorf("mongo: add items: reserve a seq: %w", err) }
	netReply := nulReply
	netReply.Labels = []string{"NetworkError"}
	for _, c := range []struct {
		name     string
		err      error
		id, ckpt string
		typed    bool
	}{
		{"nul id", wrap(nulReply), "a\x00b", "", true},
		{"nul name", wrap(nulReply), "a", "n\x00", true},
		{"long id", wrap(bigReply), long, "", true},
		{"long id with name", wrap(bigReply), long[:minUnindexableKey-2], "ck", true},
		{"write error", wrap(mongodrv.WriteException{WriteErrors: []mongodrv.WriteError{{Code: 1, Message: bigReply.Message}}}), long, "", true},
		{"nul reply, plain id", wrap(nulReply), "a", "ck", false},
		{"index reply, short id", wrap(bigReply), long[:minUnindexableKey-1], "", false},
		{"nul id, other reply", wrap(mongodrv.CommandError{Code: 2, Message: "BadValue"}), "a\x00b", "", false},
		{"network label", wrap(netReply), "a\x00b", "", false},
		{"outcome unknown", wrap(committing(mongodrv.WriteException{
			WriteConcernError: &mongodrv.WriteConcernError{Code: 64},
			WriteErrors:       []mongodrv.WriteError{{Code: 1, Message: bigReply.Message}}})), long, "", false},
		{"lost reply", wrap(committing(context.DeadlineExceeded)), "a\x00b", "", false},
		{"not a reply", wrap(errors.New("SQLSTATE 22P05")), "a\x00b", "", false},
	} {
		err := c.err
		refusedID(&err, c.id, c.ckpt)
		require.Equal(t, c.typed, errors.Is(err, session.ErrInvalidSessionID), "%s: %v", c.name, err)
		require.ErrorIs(t, err, c.err, c.name)
		if c.typed {
			require.NotErrorIs(t, err, session.ErrOutcomeUnknown, c.name)
		} else {
			require.Same(t, c.err, err, c.name)
		}
	}
}

var _ adapters.Lister = (*urlStore)(nil)
