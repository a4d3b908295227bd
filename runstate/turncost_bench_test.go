package runstate_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/adapters/postgres"
	"github.com/agentsessions/sessions/adapters/redis"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// BenchmarkRunTurnMemory is Run.Turn on the memory store (atomic too),
// where the append costs little: what remains is runstate's own work.
func BenchmarkRunTurnMemory(b *testing.B) {
	ctx := context.Background()
	s, err := memory.NewSession("s")
	if err != nil {
		b.Fatal(err)
	}
	r, err := runstate.Open(ctx, s, runstate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	turns := make([][]session.Item, 64)
	for i := range turns {
		turns[i] = turnItems(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := r.Turn(ctx, "", turns[i%len(turns)]...); err != nil {
			b.Fatal(err)
		}
		i++
		if i%len(turns) == 0 {
			b.StopTimer()
			if err := s.Clear(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}

// timedSession is a session that times its AppendWithCheckpoint.
type timedSession struct {
	session.CheckpointCommitter
	in time.Duration
}

func (t *timedSession) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	t0 := time.Now()
	v, err := t.CheckpointCommitter.AppendWithCheckpoint(ctx, items, name, doc, version)
	t.in = time.Since(t0)
	return v, err
}

// BenchmarkTurnSplit times, interleaved, a plain append and Run.Turn on
// twin sessions, and inside the turn its AppendWithCheckpoint: commit/append
// is what the store's atomic commit costs against the append, and
// runstate-µs what the turn costs beyond the commit (runstate's own work).
// SQLite at NORMAL (twin files), PostgreSQL and Redis (twin sessions of
// one store, servers from internal/testkit/testservers).
func BenchmarkTurnSplit(b *testing.B) {
	ctx := context.Background()
	b.Run("sqlite-normal", func(b *testing.B) {
		dir := b.TempDir()
		open := func(side string) *sqlite.Session {
			st, err := sqlite.OpenFile(ctx, filepath.Join(dir, side+".db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
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
		benchSplit(b, open("plain"), open("run"))
	})
	b.Run("postgres", func(b *testing.B) {
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
		plain, err := st.Session("plain")
		if err != nil {
			b.Fatal(err)
		}
		run, err := st.Session("run")
		if err != nil {
			b.Fatal(err)
		}
		benchSplit(b, plain, run)
	})
	b.Run("redis", func(b *testing.B) {
		st, err := redis.Open(ctx, testservers.Redis(b), redis.Options{KeyPrefix: "bench:" + randomHex(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		b.Cleanup(func() {
			for _, id := range []string{"plain", "run"} {
				if err := st.RemoveSession(context.Background(), id); err != nil {
					b.Error(err)
				}
			}
		})
		plain, err := st.Session("plain")
		if err != nil {
			b.Fatal(err)
		}
		run, err := st.Session("run")
		if err != nil {
			b.Fatal(err)
		}
		benchSplit(b, plain, run)
	})
}

// benchSplit runs BenchmarkTurnSplit's rounds: plain appends to plain,
// Run.Turn on run, the two alternating which goes first.
func benchSplit(b *testing.B, plain session.Session, run session.CheckpointCommitter) {
	b.Helper()
	ctx := context.Background()
	ts := &timedSession{CheckpointCommitter: run}
	r, err := runstate.Open(ctx, ts, runstate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := plain.AddItems(ctx, turnItems(-1)); err != nil { // warm up
		b.Fatal(err)
	}
	if err := r.Turn(ctx, "", turnItems(-1)...); err != nil {
		b.Fatal(err)
	}
	var tp, tr, tin, own []time.Duration
	i := 0
	for b.Loop() {
		batch := turnItems(i)
		var dp, dr time.Duration
		for j := range 2 {
			t0 := time.Now()
			if (i+j)%2 == 0 {
				if err := plain.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
				dp = time.Since(t0)
			} else {
				if err := r.Turn(ctx, "", batch...); err != nil {
					b.Fatal(err)
				}
				dr = time.Since(t0)
			}
		}
		i++
		tp, tr, tin, own = append(tp, dp), append(tr, dr), append(tin, ts.in), append(own, dr-ts.in)
	}
	p := median(tp)
	b.ReportMetric(float64(p.Microseconds()), "append-µs")
	b.ReportMetric(float64(median(tr))/float64(p), "turn/append")
	b.ReportMetric(float64(median(tin))/float64(p), "commit/append")
	b.ReportMetric(float64(median(own).Microseconds()), "runstate-µs")
}
