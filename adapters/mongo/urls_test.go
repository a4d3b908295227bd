package mongo

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// testURL returns the test server's URI with database db and the options.
func testURL(t *testing.T, db string, opts map[string]string) string {
	t.Helper()
	u, err := url.Parse(testservers.Mongo(t))
	require.NoError(t, err)
	u.Path = "/" + db
	q := u.Query()
	for k, v := range opts {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	db := uniqueDB(t)
	dropOnCleanup(t, newClient(t, nil), db)
	var mu sync.Mutex
	var reports []driver.CorruptRecord
	st, err := adapters.OpenWith(ctx, testURL(t, db, map[string]string{
		"sessions_collection": "my_sessions", "messages_collection": "my_messages", "checkpoints_collection": "my_checkpoints",
		"operations_collection": "my_operations", "ttl": "1h", "max_batch_bytes": "4096",
	}), adapters.Options{OnCorrupt: func(_ context.Context, r driver.CorruptRecord) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, r)
	}})
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("a")
	require.NoError(t, err)
	require.Equal(t, session.Probe(s), st.Declared(), "declared = probed")
	require.Equal(t, session.Caps(session.CapLatest, session.CapReplace, session.CapTTL, session.CapCheckpoints, session.CapVersionedReplace, session.CapFollow, session.CapAppendOnce), st.Declared())
	ms := s.(*Session)
	require.Equal(t, db, ms.st.opts.Database, "the path names the database")
	require.Equal(t, "1h0m0s", ms.st.opts.TTL.String(), "ttl applied")
	require.Equal(t, 4096, ms.st.opts.MaxBatchBytes, "max_batch_bytes applied")

	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	raw, ok := st.(driver.RawAppender)
	require.True(t, ok)
	require.NoError(t, raw.AppendRaw(ctx, "a", []byte("not json")))
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	mu.Lock()
	require.Len(t, reports, 1)
	require.Equal(t, "not json", string(reports[0].Raw))
	mu.Unlock()

	_, err = ms.SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
	require.NoError(t, err)
	only, err := st.Session("checkpoints-only")
	require.NoError(t, err)
	_, err = only.(session.CheckpointStore).SaveCheckpoint(ctx, "run", []byte(`{}`), 0)
	require.NoError(t, err)

	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "checkpoints-only"}, ids, "a session holding only checkpoints is listed, from the checkpoints collection")
	names, err := ms.st.client.Database(db).ListCollectionNames(ctx, bson.D{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"my_sessions", "my_messages", "my_checkpoints", "my_operations"}, names, "the collection options are applied")
	r, ok := st.(interface {
		RemoveSession(context.Context, string) error
	})
	require.True(t, ok)
	require.NoError(t, r.RemoveSession(ctx, "checkpoints-only"))
	_, _, err = only.(session.CheckpointStore).LoadCheckpoint(ctx, "run")
	require.ErrorIs(t, err, session.ErrNoCheckpoint, "RemoveSession (sessionctl check's cleanup) removes the checkpoints")
}

// ReadOnly: reads create no collection and no index.
func TestURLOpenerReadOnly(t *testing.T) {
	ctx := context.Background()
	db := uniqueDB(t)
	c := newClient(t, nil)
	dropOnCleanup(t, c, db)
	st, err := adapters.OpenWith(ctx, testURL(t, db, nil), adapters.Options{ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("a")
	require.NoError(t, err)
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, items)
	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	require.Empty(t, ids)
	names, err := c.Database(db).ListCollectionNames(ctx, bson.D{})
	require.NoError(t, err)
	require.Empty(t, names, "a read-only store creates nothing")
}

// Unknown options and names MongoDB cannot hold are refused before
// connecting (issue 10.4); the port is closed.
func TestURLOpenerRefuses(t *testing.T) {
	for _, q := range []string{
		"sessions_collection=system.users", "messages_collection=a$b", "sessions_collection=",
		"sessions_collection=a%00b", "sessions_collection=" + strings.Repeat("c", 121), "messages_collection=%ff",
		"sessions_collection=.x", "sessions_collection=a;b", "sessions_colection=x", "replicaSett=rs0",
		"ttl=soon", "max_batch_bytes=-1", "max_batch_bytes=99999999", "sessions_collection=x&messages_collection=x",
		"checkpoints_collection=system.x", "checkpoints_collection=agent_messages", "checkpoints_collection=",
	} {
		_, err := adapters.Open(context.Background(), "mongodb://127.0.0.1:1/db?"+q)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, q)
	}
	for _, db := range []string{"a.b", "a b", "a$b", strings.Repeat("d", 64)} {
		_, err := adapters.Open(context.Background(), "mongodb://127.0.0.1:1/"+url.PathEscape(db))
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, db)
	}
	for _, q := range []string{"replicaSet=rs0", "directConnection=true&appName=x", "authSource=admin", "serverSelectionTimeoutMS=10"} {
		require.Empty(t, unknownDriverOptions(mustQuery(t, q)), q)
	}
	require.Equal(t, []string{"replicaSett"}, unknownDriverOptions(mustQuery(t, "replicaSett=x&tls=true")))
}

func mustQuery(t *testing.T, q string) url.Values {
	v, err := url.ParseQuery(q)
	require.NoError(t, err)
	return v
}

func TestValidCollectionName(t *testing.T) {
	for _, ok := range []string{"agent_sessions", "a.b", "sessions-2", strings.Repeat("c", 120), "système"} {
		require.NoError(t, validCollectionName(ok), ok)
	}
	for _, bad := range []string{"", "system.users", "system.js", "a$b", "a\x00b", strings.Repeat("c", 121), "\xff", ".x", "x."} {
		require.Error(t, validCollectionName(bad), bad)
	}
}
