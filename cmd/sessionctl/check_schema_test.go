package main

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// pgCatalog lists the tables (information_schema.tables) and indexes
// (pg_indexes) of the current schema whose table names start with
// prefix, with each index's definition.
func pgCatalog(t *testing.T, dsn, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT 'table ' || table_name || ' ' || table_type FROM information_schema.tables
	WHERE table_schema = current_schema() AND starts_with(table_name, $1)
UNION ALL
SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() AND starts_with(tablename, $1)
UNION ALL
SELECT 'schema ' || nspname FROM pg_namespace WHERE starts_with(nspname, $1)
ORDER BY 1`, prefix)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func pgExec(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range stmts {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, s)
	}
}

// pgCheckURL returns the test server's URL with tables named u_s, u_m,
// u_c for a fresh u, and u.
func pgCheckURL(t *testing.T) (string, string, string) {
	base := testservers.Postgres(t)
	u := storetest.Unique("chk")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base, base + sep + "sessions_table=" + u + "_s&messages_table=" + u + "_m&checkpoints_table=" + u + "_c", u
}

// check on PostgreSQL leaves the catalog as it found it: the tables and
// indexes its stores create are dropped again, in a database without
// any, in one with the Python SDK's two tables, and in one that has them
// all; a new table something else wrote to meanwhile is left, exit 1.
func TestCheckLeavesAPostgresSchemaAsItWas(t *testing.T) {
	base, dsn, u := pgCheckURL(t)
	require.Empty(t, pgCatalog(t, base, u))
	code, out, stderr := sessionctl(t, "check", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "\nlevel FULL\n")
	require.Contains(t, out, "schema: as it was (dropped what the check created: table "+u+"_c, table "+u+"_m, table "+u+"_m_operations, table "+u+"_s)\n")
	require.Empty(t, pgCatalog(t, base, u), "nothing of the check is left")

	// The Python SDK's tables (SQLAlchemy's DDL, with its one index).
	pgExec(t, base,
		`CREATE TABLE "`+u+`_s" (session_id VARCHAR NOT NULL, created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, updated_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, PRIMARY KEY (session_id))`,
		`CREATE TABLE "`+u+`_m" (id SERIAL NOT NULL, session_id VARCHAR NOT NULL, message_data TEXT NOT NULL, created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, PRIMARY KEY (id), FOREIGN KEY (session_id) REFERENCES "`+u+`_s" (session_id) ON DELETE CASCADE)`,
		`CREATE INDEX "idx_`+u+`_m_session_time" ON "`+u+`_m" (session_id, created_at)`,
		`INSERT INTO "`+u+`_s" (session_id) VALUES ('py-1')`,
		`INSERT INTO "`+u+`_m" (session_id, message_data) VALUES ('py-1', '{"role": "user", "content": "hi"}')`,
	)
	before := pgCatalog(t, base, u)
	require.Len(t, before, 5) // two tables, two primary keys, one index
	code, out, stderr = sessionctl(t, "check", "-run", "core", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "schema: as it was (dropped what the check created: table "+u+"_c, table "+u+"_m_operations, index idx_"+u+"_m_time_id)\n")
	require.Equal(t, before, pgCatalog(t, base, u), "the catalog is as it was")
	require.Equal(t, []string{`{"role": "user", "content": "hi"}`}, read(t, dsn, "py-1"))

	// A database that has every table keeps them.
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before = pgCatalog(t, base, u)
	code, out, stderr = sessionctl(t, "check", "-run", "core", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "schema: as it was (the check created nothing)\n")
	require.Equal(t, before, pgCatalog(t, base, u))

	// Something else saves a checkpoint into the new table during the
	// check: the table is left, and the check says so (exit 1).
	pgExec(t, base, `DROP TABLE "`+u+`_c"`)
	before = pgCatalog(t, base, u)
	checkHookBeforeRestore = func() { saveCheckpoint(t, dsn, "other-writer") }
	defer func() { checkHookBeforeRestore = nil }()
	code, out, stderr = sessionctl(t, "check", "-run", "core", dsn)
	checkHookBeforeRestore = nil
	require.Equal(t, 1, code, out+stderr)
	require.Contains(t, stderr, "is not as it was: left table "+u+"_c (1 row, written during the check by something else)")
	require.NotEqual(t, before, pgCatalog(t, base, u))
	require.Equal(t, []string{"run"}, checkpointNames(t, dsn, "other-writer"))
}

// saveCheckpoint saves a checkpoint "run" of session id, as another
// process would.
func saveCheckpoint(t *testing.T, dsn, id string) {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session(id)
	require.NoError(t, err)
	_, err = s.(session.CheckpointStore).SaveCheckpoint(ctx, "run", []byte(`{"v":1}`), 0)
	require.NoError(t, err)
}

func checkpointNames(t *testing.T, dsn, id string) []string {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.OpenWith(ctx, dsn, adapters.Options{ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session(id)
	require.NoError(t, err)
	names, err := s.(session.CheckpointStore).ListCheckpoints(ctx)
	require.NoError(t, err)
	return names
}

// mongoCatalog lists the collections (listCollections) of database db
// and each one's indexes (listIndexes: name and key).
func mongoCatalog(t *testing.T, uri, db string) []string {
	t.Helper()
	ctx := context.Background()
	client, err := mongodrv.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	defer func() { _ = client.Disconnect(ctx) }()
	d := client.Database(db)
	colls, err := d.ListCollectionNames(ctx, bson.D{})
	require.NoError(t, err)
	var out []string
	for _, c := range colls {
		out = append(out, "collection "+c)
		specs, err := d.Collection(c).Indexes().ListSpecifications(ctx)
		require.NoError(t, err)
		for _, s := range specs {
			out = append(out, "index "+c+" "+s.Name+" "+s.KeysDocument.String())
		}
	}
	sort.Strings(out)
	return out
}

// check on MongoDB leaves the catalog as it found it: the collections and
// indexes its stores create are dropped again, in a database without any,
// in one where the Python SDK's two collections exist without indexes,
// and in one that has them all; a new collection something else wrote to
// meanwhile is left, exit 1.
func TestCheckLeavesAMongoSchemaAsItWas(t *testing.T) {
	server := testservers.Mongo(t)
	u, err := url.Parse(server)
	require.NoError(t, err)
	db := storetest.Unique("chk")
	u.Path = "/" + db
	dsn := u.String()
	require.Empty(t, mongoCatalog(t, server, db))
	code, out, stderr := sessionctl(t, "check", "-run", "core", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "schema: as it was (dropped what the check created: collection agent_checkpoints, collection agent_messages, collection agent_operations, collection agent_sessions)\n")
	require.Empty(t, mongoCatalog(t, server, db), "nothing of the check is left")

	// The Python SDK's collections, before any index was made on them.
	seed(t, dsn, "py-1", `{"role":"user","content":"hi"}`)
	ctx := context.Background()
	client, err := mongodrv.Connect(options.Client().ApplyURI(server))
	require.NoError(t, err)
	defer func() { _ = client.Disconnect(ctx) }()
	for _, c := range []string{"agent_checkpoints", "agent_operations"} {
		require.NoError(t, client.Database(db).Collection(c).Drop(ctx))
	}
	for _, c := range []string{"agent_sessions", "agent_messages"} {
		require.NoError(t, client.Database(db).Collection(c).Indexes().DropAll(ctx))
	}
	before := mongoCatalog(t, server, db)
	require.Equal(t, []string{"collection agent_messages", "collection agent_sessions",
		`index agent_messages _id_ {"_id": {"$numberInt":"1"}}`, `index agent_sessions _id_ {"_id": {"$numberInt":"1"}}`}, before)
	code, out, stderr = sessionctl(t, "check", "-run", "core", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `schema: as it was \(dropped what the check created: collection agent_checkpoints, collection agent_operations, index \S+ of collection agent_\w+`, out)
	require.Equal(t, before, mongoCatalog(t, server, db), "the catalog is as it was")
	require.Equal(t, []string{`{"role":"user","content":"hi"}`}, read(t, dsn, "py-1"))

	// A database that has everything keeps it.
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	s, err := st.Session("py-1")
	require.NoError(t, err)
	_, err = s.Items(ctx) // the first use makes every collection and index
	require.NoError(t, err)
	require.NoError(t, st.Close())
	before = mongoCatalog(t, server, db)
	code, out, stderr = sessionctl(t, "check", "-run", "core", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "schema: as it was (the check created nothing)\n")
	require.Equal(t, before, mongoCatalog(t, server, db))

	// Something else saves a checkpoint into the new collection during
	// the check: it is left, and the check says so (exit 1).
	require.NoError(t, client.Database(db).Collection("agent_checkpoints").Drop(ctx))
	before = mongoCatalog(t, server, db)
	checkHookBeforeRestore = func() { saveCheckpoint(t, dsn, "other-writer") }
	defer func() { checkHookBeforeRestore = nil }()
	code, out, stderr = sessionctl(t, "check", "-run", "core", dsn)
	checkHookBeforeRestore = nil
	require.Equal(t, 1, code, out+stderr)
	require.Contains(t, stderr, "is not as it was: left collection agent_checkpoints (1 document, written during the check by something else)")
	require.NotEqual(t, before, mongoCatalog(t, server, db))
	require.Equal(t, []string{"run"}, checkpointNames(t, dsn, "other-writer"))
}
