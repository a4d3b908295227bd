package mongo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

func TestDatabaseFromURI(t *testing.T) {
	for _, tc := range []struct{ uri, db string }{
		{"mongodb://localhost:27017", ""},
		{"mongodb://localhost:27017/", ""},
		{"mongodb://localhost:27017/agents", "agents"},
		{"mongodb://u:p%40ss@h1,h2:27018/my%20db?replicaSet=rs0&w=majority", "my db"},
		{"mongodb+srv://user:pw@cluster0.example.net/prod?retryWrites=true", "prod"},
		{"mongodb://h/?authSource=admin", ""},
	} {
		db, err := databaseFromURI(tc.uri)
		require.NoError(t, err, tc.uri)
		require.Equal(t, tc.db, db, tc.uri)
	}
	_, err := databaseFromURI("localhost:27017")
	require.Error(t, err)
	require.NotContains(t, redact("mongodb://user:secret@h/db"), "secret")
}

func TestOpenAndClose(t *testing.T) {
	ctx := context.Background()
	uri := strings.TrimSuffix(testservers.Mongo(t), "/")
	scheme, rest, _ := strings.Cut(uri, "://")
	hosts, query, _ := strings.Cut(rest, "/")
	if i := strings.Index(hosts, "?"); i >= 0 {
		hosts, query = hosts[:i], hosts[i:]
	}
	if query != "" && !strings.HasPrefix(query, "?") {
		_, query, _ = strings.Cut(query, "?")
		query = "?" + query
	}
	db := uniqueDB(t)
	withDB := scheme + "://" + hosts + "/" + db + query

	t.Run("the URI names the database", func(t *testing.T) {
		st, err := Open(ctx, withDB, Options{})
		require.NoError(t, err)
		dropOnCleanup(t, newClient(t, nil), db)
		require.Equal(t, db, st.Database())
		s := mustSession(t, st, "open")
		require.NoError(t, s.AddItems(ctx, numbered("o", 2)))
		require.NoError(t, st.Close(ctx))
		require.NoError(t, st.Close(ctx), "closing twice is fine")
		require.Error(t, st.Client().Ping(ctx, nil), "Close disconnects the client Open made")
		_, err = st.Session("x")
		require.ErrorIs(t, err, session.ErrClosed)
		checkClosed(t, s)
	})

	t.Run("Options.Database wins; no database at all means agents", func(t *testing.T) {
		st, err := Open(ctx, withDB, Options{Database: db + "_other"})
		require.NoError(t, err)
		require.Equal(t, db+"_other", st.Database())
		require.NoError(t, st.Close(ctx))
		st, err = Open(ctx, scheme+"://"+hosts+"/"+query, Options{})
		require.NoError(t, err)
		require.Equal(t, DefaultDatabase, st.Database())
		require.NoError(t, st.Close(ctx))
	})

	t.Run("an injected client stays the caller's", func(t *testing.T) {
		c := newClient(t, nil)
		st, err := New(c, Options{Database: db})
		require.NoError(t, err)
		s := mustSession(t, st, "injected")
		require.NoError(t, s.AddItems(ctx, numbered("i", 1)))
		require.NoError(t, st.Close(ctx))
		require.NoError(t, c.Ping(ctx, nil), "Close leaves an injected client connected")
		checkClosed(t, s)
		st2, err := New(c, Options{Database: db})
		require.NoError(t, err)
		got, err := mustSession(t, st2, "injected").Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
	})

	t.Run("bad input", func(t *testing.T) {
		_, err := New(nil, Options{})
		require.Error(t, err)
		_, err = Open(ctx, "not a uri", Options{})
		require.Error(t, err)
		c := newClient(t, nil)
		st, err := New(c, Options{Database: db})
		require.NoError(t, err)
		_, err = st.Session("")
		require.ErrorIs(t, err, session.ErrInvalidSessionID)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err = Open(cancelled, withDB, Options{})
		require.ErrorIs(t, err, context.Canceled)
	})
}

// checkClosed asserts that every call on s fails with ErrClosed.
func checkClosed(t *testing.T, s *Session) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Items(ctx)
	require.ErrorIs(t, err, session.ErrClosed)
	_, err = s.LatestItems(ctx, 1)
	require.ErrorIs(t, err, session.ErrClosed)
	require.ErrorIs(t, s.AddItems(ctx, numbered("c", 1)), session.ErrClosed)
	require.ErrorIs(t, s.AddItems(ctx, nil), session.ErrClosed, "even an empty batch")
	_, _, err = s.PopItem(ctx)
	require.ErrorIs(t, err, session.ErrClosed)
	require.ErrorIs(t, s.Clear(ctx), session.ErrClosed)
	require.ErrorIs(t, s.ReplaceItems(ctx, numbered("c", 1)), session.ErrClosed)
	require.ErrorIs(t, s.Touch(ctx), session.ErrClosed)
	_, _, err = s.ExpiresIn(ctx)
	require.ErrorIs(t, err, session.ErrClosed)
}

// TestInvalidUTF8IDs: an id that is not valid UTF-8 cannot be a BSON
// string; it is refused with a clear error, before anything is written,
// rather than stored altered (before, "\xff\xfe" and "\xfe\xff" landed in
// one session and AddItems returned nil while All returned nothing).
func TestInvalidUTF8IDs(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	for _, id := range []string{"\xff\xfe", "\xfe\xff", "ok\x80", "\xc3", "\xed\xa0\x80"} {
		_, err := st.Session(id)
		require.ErrorIs(t, err, session.ErrInvalidSessionID, "%q", id)
		require.Contains(t, err.Error(), "UTF-8")
	}
	n, err := st.sessions.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")
	for i, id := range []string{"é", "日本", "\U0001F600", "a\x00b"} {
		s, err := st.Session(id)
		require.NoError(t, err, "%q is valid UTF-8", id)
		tag := fmt.Sprint("u", i)
		require.NoError(t, s.AddItems(ctx, numbered(tag, 1)))
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered(tag, 1)), texts(got), "%q holds its own items", id)
	}
}
