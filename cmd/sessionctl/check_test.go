package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	_ "modernc.org/sqlite"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/conformance"
	"github.com/agentsessions/sessions/conformance/contract"
	"github.com/agentsessions/sessions/conformance/heldwrite"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

func TestCheckDefaultsToEmbeddedSQLite(t *testing.T) {
	code, out, stderr := sessionctl(t, "check")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "checking the embedded SQLite default")
	require.Regexp(t, `(?m)^contract +FULL +\d+ passed, 0 failed, \d+ skipped of 42$`, out)
	require.Regexp(t, `(?m)^contract \(capabilities hidden\) +BASE +\d+ passed, 0 failed, \d+ skipped of 42`, out)
	require.Regexp(t, `(?m)^held-write +FULL +144 passed, 0 failed, 0 skipped of 144$`, out)
	require.Contains(t, out, "\nlevel FULL\n")
	require.Regexp(t, `(?m)^  PASS  base        corrupt/isolated$`, out, "the CLI harness writes raw records on sqlite")
	require.Contains(t, out, "probe sessions: "+conformance.ProbePrefix)
}

// A filtered run grades what it ran and says the rest did not run: it can
// never grade FULL.
func TestCheckFilteredIsNotFull(t *testing.T) {
	code, out, stderr := sessionctl(t, "check", "-native-only", "-run", "core/|limit/|corrupt/|replace/", "memory://")
	require.Equal(t, 0, code, stderr+out)
	require.Contains(t, out, "PASS  base        corrupt/isolated", "memory:// has a raw-write hook")
	require.Contains(t, out, "did not run")
	require.Contains(t, out, "\nlevel NONE\n")
	require.NotContains(t, out, "capabilities hidden")
}

func TestCheckJSON(t *testing.T) {
	code, out, stderr := sessionctl(t, "check", "-json", "-native-only", "-run", "core/order", "memory://")
	require.Equal(t, 0, code, stderr)
	var doc struct {
		Store string `json:"store"`
		Level string `json:"level"`
		Parts []struct {
			Name   string `json:"name"`
			Total  int    `json:"total"`
			Passed int    `json:"passed"`
		} `json:"parts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, "NONE", doc.Level)
	require.Len(t, doc.Parts, 2, "contract and held-write")
	require.Equal(t, conformance.PartContract, doc.Parts[0].Name)
	require.Equal(t, 1, doc.Parts[0].Passed)
	require.Equal(t, 42, doc.Parts[0].Total) // 33; 35 with the versioned-replace clauses; 36 with core/after-close; 41 with the follow and append-once clauses; 42 with follow/equal-rewrite
	require.Equal(t, conformance.PartHeldWrite, doc.Parts[1].Name)
}

// sqliteDump is every row of every table of a SQLite database, the schema
// included (sqlite_master), as text, table by table. sqlite_sequence is
// returned apart.
func sqliteDump(t *testing.T, path string) (tables map[string][]string, sequence map[string]int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	names := []string{"sqlite_master"}
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	tables, sequence = map[string][]string{}, map[string]int64{}
	for _, n := range names {
		if n == "sqlite_sequence" {
			rows, err := db.Query(`SELECT name, seq FROM sqlite_sequence`)
			require.NoError(t, err)
			for rows.Next() {
				var name string
				var seq int64
				require.NoError(t, rows.Scan(&name, &seq))
				sequence[name] = seq
			}
			require.NoError(t, rows.Err())
			rows.Close()
			continue
		}
		rows, err := db.Query(fmt.Sprintf(`SELECT * FROM %q`, n))
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			var b strings.Builder
			for i, v := range vals {
				fmt.Fprintf(&b, "%s=%T:%q;", cols[i], v, fmt.Sprint(v))
				if bs, ok := v.([]byte); ok {
					fmt.Fprintf(&b, "bytes:%x;", bs)
				}
			}
			out = append(out, b.String())
		}
		require.NoError(t, rows.Err())
		rows.Close()
		sort.Strings(out)
		tables[n] = out
	}
	return tables, sequence
}

// TestCheckLeavesTheStoreAsItWas runs the whole check against stores that
// hold users' sessions (a Python-written SQLite file with a corrupt record,
// native and Python-layout Redis sessions, unrelated keys) and compares the
// store before and after: every probe the check wrote is gone, and nothing
// else changed.
func TestCheckLeavesTheStoreAsItWas(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := copyFile(t, filepath.Join("..", "..", "adapters", "sqlite", "testdata", "python", "session.db"))
		dsn := "sqlite://" + path
		seed(t, dsn, "user-a", `{"role":"user","content":"hello"}`, `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`)
		seed(t, dsn, "agentsessions-check", `{"role":"user","content":"an id that merely resembles the namespace"}`)
		before, seqBefore := sqliteDump(t, path)

		code, out, stderr := sessionctl(t, "check", dsn)
		require.Equal(t, 0, code, stderr+out)
		require.Contains(t, out, "\nlevel FULL\n")

		after, seqAfter := sqliteDump(t, path)
		require.Equal(t, before, after, "every table, row for row, is as it was")
		// AUTOINCREMENT's counter is the one thing a write leaves: SQLite
		// never hands out an id twice, so the counter of agent_messages
		// moved past the probes' rows. Winding it back could reuse an id a
		// concurrent writer took; it only rises, and no stored id changed.
		for name, seq := range seqBefore {
			require.GreaterOrEqual(t, seqAfter[name], seq, name)
		}
		for name := range seqAfter {
			_, ok := seqBefore[name]
			require.True(t, ok, "the check created no new autoincrement table: %s", name)
		}
	})
	t.Run("redis", func(t *testing.T) {
		base := testservers.Redis(t)
		dsn := regexp.MustCompile(`/\d+$`).ReplaceAllString(base, "") + "/14"
		opt, err := goredis.ParseURL(dsn)
		require.NoError(t, err)
		rdb := goredis.NewClient(opt)
		defer rdb.Close()
		ctx := context.Background()
		prior, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		require.Zero(t, prior, "database 14 of the test server is this test's own")
		t.Cleanup(func() { rdb.FlushDB(context.Background()) })

		seed(t, dsn, "user-a", `{"role":"user","content":"hello"}`, `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`)
		seed(t, dsn, "user:b {tag}", `{"role":"user","content":"é ☃"}`)
		seed(t, dsn+"?layout=python", "py-session", `{"role":"user","content":"written in the Python SDK's layout"}`)
		require.NoError(t, rdb.Set(ctx, "app:config", "unrelated", 0).Err())
		require.NoError(t, rdb.HSet(ctx, "app:hash", "f", "v").Err())
		before := redisDump(t, rdb)
		require.Greater(t, len(before), 4)

		code, out, stderr := sessionctl(t, "check", "-min-ttl", "250ms", dsn)
		require.Equal(t, 0, code, stderr+out)
		require.Contains(t, out, "\nlevel FULL\n")
		require.Equal(t, before, redisDump(t, rdb), "the key set and every key's DUMP are as they were")
	})
}

func TestCheckLeavesTheMongoStoreAsItWas(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole check against the Mongo-wire server is long")
	}
	u, err := url.Parse(testservers.Mongo(t))
	require.NoError(t, err)
	db := fmt.Sprintf("check_leaves_%d", time.Now().UnixNano())
	u.Path = "/" + db
	dsn := u.String()
	ctx := context.Background()
	c, err := mongodrv.Connect(options.Client().ApplyURI(dsn))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Database(db).Drop(context.Background())
		_ = c.Disconnect(context.Background())
	})
	seed(t, dsn, "user-a", `{"role":"user","content":"hello"}`, `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`)
	seed(t, dsn, "user:b {tag}", `{"role":"user","content":"é ☃"}`)
	_, err = c.Database(db).Collection("app_other").InsertOne(ctx, bson.D{{Key: "unrelated", Value: true}})
	require.NoError(t, err)
	before := mongoDump(t, c.Database(db))

	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	_, removes := st.(sessionRemover)
	require.NoError(t, st.Close())

	// Every kind of clause but the contract's two load clauses, whose
	// thousands of appends (each its own probe session's) take minutes on
	// the Mongo-wire test server and leave nothing another clause does not:
	// what matters here is what a check leaves behind.
	code, out, stderr := sessionctl(t, "check", "-native-only", "-min-ttl", "250ms", "-run", mongoCheckClauses(t), dsn)
	after := mongoDump(t, c.Database(db))
	if !removes {
		// Clear keeps a MongoDB session's document (its _generation and
		// _seq, as Python's clear_session does), leaves an empty marker in
		// the new generation, and sweeps older generations best effort;
		// this store offers no RemoveSession to delete the rest. So probe
		// documents may remain, but only as traces a read never shows:
		// every probe session they name must read empty. Users' documents
		// and every other collection must be exactly as they were.
		probe := `"session_id":"` + conformance.ProbePrefix
		ids := map[string]bool{}
		left := 0
		for _, coll := range []string{"agent_sessions", "agent_messages"} {
			var kept []string
			for _, d := range after[coll] {
				if !strings.Contains(d, probe) {
					kept = append(kept, d)
					continue
				}
				var doc struct {
					SessionID string `json:"session_id"`
				}
				require.NoError(t, json.Unmarshal([]byte(d), &doc))
				ids[doc.SessionID] = true
				left++
			}
			after[coll] = kept
		}
		st, err := adapters.Open(ctx, dsn)
		require.NoError(t, err)
		for id := range ids {
			s, err := st.Session(id)
			require.NoError(t, err)
			items, err := s.Items(ctx)
			require.NoError(t, err)
			require.Empty(t, items, "probe session %q reads empty", id)
		}
		require.NoError(t, st.Close())
		t.Logf("KNOWN GAP: %d probe documents of %d emptied probe sessions remain (the mongo store has no RemoveSession)", left, len(ids))
	}
	require.Equal(t, before, after, "every collection, document and index as it was")
	// The grade itself is adapters/mongo's TestConformance's business; a
	// slow shared server may time a clause out here, and even then the
	// check must leave nothing behind.
	require.Contains(t, []int{0, 1}, code, stderr)
	t.Logf("exit %d; %s", code, out[strings.LastIndex(out, "\ncontract "):])
}

// mongoCheckClauses matches the contract's clauses but its two load
// clauses (concurrency/two-handles and versioned-replace/beside-writers),
// and every held-write scenario in its variant that keeps the checkpoint
// in the store (the live and JSON variants write the same items and no
// more).
func mongoCheckClauses(t *testing.T) string {
	var names []string
	for _, cl := range contract.Clauses() {
		if cl.Name != "concurrency/two-handles" && cl.Name != "versioned-replace/beside-writers" {
			names = append(names, regexp.QuoteMeta(cl.Name))
		}
	}
	require.Len(t, names, len(contract.Clauses())-2, "both load clauses are still named so")
	stored := 0
	for _, cl := range heldwrite.Clauses() {
		if strings.HasSuffix(cl.Name, "/stored") {
			names = append(names, regexp.QuoteMeta(cl.Name))
			stored++
		}
	}
	require.Equal(t, len(heldwrite.Clauses())/3, stored, "a third of the held-write clauses keep their checkpoint in the store")
	return "^(" + strings.Join(names, "|") + ")$"
}

// mongoDump returns every document of every collection of db, as canonical
// extended JSON, and each collection's indexes.
func mongoDump(t *testing.T, db *mongodrv.Database) map[string][]string {
	t.Helper()
	ctx := context.Background()
	names, err := db.ListCollectionNames(ctx, bson.D{})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, n := range names {
		cur, err := db.Collection(n).Find(ctx, bson.D{})
		require.NoError(t, err)
		var docs []string
		for cur.Next(ctx) {
			js, err := bson.MarshalExtJSON(cur.Current, true, false)
			require.NoError(t, err)
			docs = append(docs, string(js))
		}
		require.NoError(t, cur.Err())
		sort.Strings(docs)
		out[n] = docs
		specs, err := db.Collection(n).Indexes().ListSpecifications(ctx)
		require.NoError(t, err)
		for _, s := range specs {
			out[n+" indexes"] = append(out[n+" indexes"], fmt.Sprintf("%s %s unique=%v", s.Name, s.KeysDocument, s.Unique != nil && *s.Unique))
		}
		sort.Strings(out[n+" indexes"])
	}
	return out
}

// redisDump returns every key of the database with its DUMP and whether it
// has a TTL.
func redisDump(t *testing.T, rdb *goredis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		d, err := rdb.Dump(ctx, k).Result()
		require.NoError(t, err, k)
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err, k)
		out[k] = fmt.Sprintf("%x ttl=%v", d, ttl > 0)
	}
	require.NoError(t, iter.Err())
	return out
}
