package runstate_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/adapters/sqlite"
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

// timedSession is an SQLite session that times its AppendWithCheckpoint.
type timedSession struct {
	*sqlite.Session
	in time.Duration
}

func (t *timedSession) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	t0 := time.Now()
	v, err := t.Session.AppendWithCheckpoint(ctx, items, name, doc, version)
	t.in = time.Since(t0)
	return v, err
}

// BenchmarkTurnSplit times, interleaved on twin files at NORMAL, a plain
// append and Run.Turn, and inside the turn its AppendWithCheckpoint: what
// the turn costs beyond it is runstate's own work.
func BenchmarkTurnSplit(b *testing.B) {
	ctx := context.Background()
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
	plain := open("plain")
	ts := &timedSession{Session: open("run")}
	r, err := runstate.Open(ctx, ts, runstate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var tp, tr, tin, own []time.Duration
	i := 0
	for b.Loop() {
		batch := turnItems(i)
		i++
		t0 := time.Now()
		if err := plain.AddItems(ctx, batch); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := r.Turn(ctx, "", batch...); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		tp, tr, tin, own = append(tp, t1.Sub(t0)), append(tr, t2.Sub(t1)), append(tin, ts.in), append(own, t2.Sub(t1)-ts.in)
	}
	p := median(tp)
	b.ReportMetric(float64(p.Microseconds()), "append-µs")
	b.ReportMetric(float64(median(tr))/float64(p), "turn/append")
	b.ReportMetric(float64(median(tin))/float64(p), "commit/append")
	b.ReportMetric(float64(median(own).Microseconds()), "runstate-µs")
}
