package runstate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/adapters/mongo"
	"github.com/agentsessions/sessions/adapters/postgres"
	"github.com/agentsessions/sessions/adapters/redis"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// BenchmarkRunTurnRatio times, interleaved op by op (the order rotating
// every round), a plain AddItems of a 20-item turn and Run.Turn of the
// same turn (a crash-safe save: Save with Register) on twin sessions of
// one backend (twin files for SQLite), and reports the medians and the
// ratios to the plain append:
//
//	atomic/append  the checkpoint committed with the append in one
//	               transaction (session.CheckpointCommitter: SQLite,
//	               PostgreSQL, Redis); no digest is read
//	digest/append  the protocol of a store without atomic commit: the
//	               checkpoint with its pending write saved before the
//	               append, the session tail read, the checkpoint saved
//	               after. On SQLite, PostgreSQL and Redis the session is
//	               wrapped so that it offers no CheckpointCommitter; Mongo
//	               has only this path.
//
// The server backends come from internal/testkit/testservers; on the Redis
// Cluster the three sessions live on one master.
func BenchmarkRunTurnRatio(b *testing.B) {
	for _, sync := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		b.Run("sqlite-"+string(sync), func(b *testing.B) {
			dir := b.TempDir()
			open := func(side string) session.Session {
				st, err := sqlite.OpenFile(context.Background(), filepath.Join(dir, side+".db"), sqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close() })
				s, err := st.Session("s")
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			benchTurns(b, open("append"), open("atomic"), open("digest"))
		})
	}
	b.Run("postgres", func(b *testing.B) {
		ctx := context.Background()
		schema := "bench_" + randomHex(b)
		st, err := postgres.Open(ctx, testservers.Postgres(b), postgres.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		b.Cleanup(func() {
			if _, err := st.Pool().Exec(context.Background(), `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
				b.Error(err)
			}
		})
		benchTurns(b, sessionOf(b, st, "append"), sessionOf(b, st, "atomic"), sessionOf(b, st, "digest"))
	})
	b.Run("redis", func(b *testing.B) {
		ctx := context.Background()
		st, err := redis.Open(ctx, testservers.Redis(b), redis.Options{KeyPrefix: "bench:" + randomHex(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		ids := []string{"append", "atomic", "digest"}
		b.Cleanup(func() {
			for _, id := range ids {
				if err := st.RemoveSession(context.Background(), id); err != nil {
					b.Error(err)
				}
			}
		})
		benchTurns(b, sessionOf(b, st, ids[0]), sessionOf(b, st, ids[1]), sessionOf(b, st, ids[2]))
	})
	b.Run("redis-cluster", func(b *testing.B) {
		ctx := context.Background()
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testservers.RedisCluster(b)})
		b.Cleanup(func() { cc.Close() })
		st, err := redis.New(cc, redis.Options{KeyPrefix: "bench:" + randomHex(b)})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.LoadScripts(ctx); err != nil {
			b.Fatal(err)
		}
		ids := sameMaster(b, cc, st, "append", "atomic", "digest")
		b.Cleanup(func() {
			for _, id := range ids {
				if err := st.RemoveSession(context.Background(), id); err != nil {
					b.Error(err)
				}
			}
		})
		benchTurns(b, sessionOf(b, st, ids[0]), sessionOf(b, st, ids[1]), sessionOf(b, st, ids[2]))
	})
	b.Run("mongo", func(b *testing.B) {
		ctx := context.Background()
		db := "bench_" + randomHex(b)
		st, err := mongo.Open(ctx, testservers.Mongo(b), mongo.Options{Database: db})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close(context.Background()) })
		b.Cleanup(func() {
			if err := st.Client().Database(db).Drop(context.Background()); err != nil {
				b.Error(err)
			}
		})
		benchTurns(b, sessionOf(b, st, "append"), nil, sessionOf(b, st, "digest"))
	})
}

// sameMaster returns session ids, one per name (the name and a number),
// whose keys live on one master of the cluster, so that every side of a
// round is timed against the same node.
func sameMaster(b *testing.B, cc *goredis.ClusterClient, st *redis.Store, names ...string) []string {
	b.Helper()
	ctx := context.Background()
	var ids []string
	node := ""
	for _, name := range names {
		for n := 0; ; n++ {
			id := fmt.Sprintf("%s%d", name, n)
			s, err := st.Session(id)
			if err != nil {
				b.Fatal(err)
			}
			m, err := cc.MasterForKey(ctx, s.Keys()[0])
			if err != nil {
				b.Fatal(err)
			}
			if node == "" {
				node = m.Options().Addr
			}
			if m.Options().Addr == node {
				ids = append(ids, id)
				break
			}
		}
	}
	return ids
}

// sessionOf returns st's session id or fails b.
func sessionOf[S session.Session](b *testing.B, st interface {
	Session(string) (S, error)
}, id string) session.Session {
	b.Helper()
	s, err := st.Session(id)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// benchTurns runs the interleaved rounds of BenchmarkRunTurnRatio: plain
// appends to plain, Run.Turn on atomic (which must be a
// session.CheckpointCommitter; nil: no such side) and on digest through
// the digest protocol (the session must be a session.CheckpointStore: the
// checkpoint is kept there).
func benchTurns(b *testing.B, plain, atomic, digest session.Session) {
	b.Helper()
	ctx := context.Background()
	type side struct {
		name string
		op   func(batch []session.Item) error
		t    []time.Duration
	}
	sides := []*side{{name: "append", op: func(batch []session.Item) error { return plain.AddItems(ctx, batch) }}}
	if atomic != nil {
		if _, ok := atomic.(session.CheckpointCommitter); !ok {
			b.Fatalf("%T does not commit a checkpoint with an append", atomic)
		}
		ra, err := runstate.Open(ctx, atomic, runstate.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sides = append(sides, &side{name: "atomic", op: func(batch []session.Item) error { return ra.Turn(ctx, "", batch...) }})
	}
	cs, ok := digest.(session.CheckpointStore)
	if !ok {
		b.Fatalf("%T keeps no checkpoints", digest)
	}
	var viaDigest session.Session = latestOnly{digest.(session.LatestReader)}
	if _, ok := digest.(session.CheckpointCommitter); !ok {
		viaDigest = digest // Mongo: the session itself takes the digest path
	}
	rd, err := runstate.Open(ctx, viaDigest, runstate.Options{Store: cs})
	if err != nil {
		b.Fatal(err)
	}
	sides = append(sides, &side{name: "digest", op: func(batch []session.Item) error { return rd.Turn(ctx, "", batch...) }})
	for _, s := range sides { // warm up: statements, connections, scripts
		if err := s.op(turnItems(-1)); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		batch := turnItems(i)
		for j := range sides {
			s := sides[(i+j)%len(sides)]
			t0 := time.Now()
			if err := s.op(batch); err != nil {
				b.Fatal(s.name, err)
			}
			s.t = append(s.t, time.Since(t0))
		}
		i++
	}
	p := median(sides[0].t)
	b.ReportMetric(float64(p.Microseconds()), "append-µs")
	for _, s := range sides[1:] {
		m := median(s.t)
		b.ReportMetric(float64(m.Microseconds()), s.name+"-µs")
		b.ReportMetric(float64(m)/float64(p), s.name+"/append")
	}
}

// randomHex returns 12 random hex digits, for names no other run uses.
func randomHex(b *testing.B) string {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(r[:])
}

// latestOnly is a session with LatestReader and nothing else: no
// checkpoint capability, so a Run keeps its checkpoint through Options.Store
// and the digest protocol.
type latestOnly struct{ session.LatestReader }

// turnItems is a 20-item turn whose calls are unique to turn i.
func turnItems(i int) []session.Item {
	var out []session.Item
	for k := range 8 {
		out = append(out,
			session.MustItem(fmt.Sprintf(`{"type":"function_call","id":"fc_%d_%d","call_id":"call_%d_%d","name":"get_weather","arguments":"{\"location\": \"Paris\"}","status":"completed"}`, i, k, i, k)),
			session.MustItem(fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d_%d","output":"{\"temperature\": 18}"}`, i, k)))
	}
	for k := range 4 {
		out = append(out, session.MustItem(fmt.Sprintf(`{"type":"message","id":"msg_%d_%d","role":"assistant","status":"completed","content":[{"type":"output_text","text":"reply %d","annotations":[]}]}`, i, k, k)))
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
