package runstate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// BenchmarkRunTurnRatio times, interleaved op by op on twin SQLite files,
// a plain append of a 20-item turn and Run.Turn of the same turn: the
// crash-safe save with its checkpoint committed in the same transaction
// (atomic) and, beside it, the digest protocol a store without atomic
// commit pays (checkpoint saved before the append, tail read, checkpoint
// saved after). It reports the medians and their ratios.
func BenchmarkRunTurnRatio(b *testing.B) {
	for _, sync := range []sqlite.Synchronous{sqlite.SyncFull, sqlite.SyncNormal} {
		b.Run("sqlite-"+string(sync), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			open := func(side string) *sqlite.Session {
				st, err := sqlite.OpenFile(ctx, filepath.Join(dir, side+".db"), sqlite.Options{Synchronous: sync})
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
			plain, atomic, digest := open("append"), open("atomic"), open("digest")
			ra, err := runstate.Open(ctx, atomic, runstate.Options{})
			if err != nil {
				b.Fatal(err)
			}
			rd, err := runstate.Open(ctx, latestOnly{digest}, runstate.Options{Store: digest})
			if err != nil {
				b.Fatal(err)
			}
			var tp, ta, td []time.Duration
			i := 0
			for b.Loop() {
				batch := turnItems(i)
				i++
				t0 := time.Now()
				if err := plain.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := ra.Turn(ctx, "", batch...); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if err := rd.Turn(ctx, "", batch...); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				tp, ta, td = append(tp, t1.Sub(t0)), append(ta, t2.Sub(t1)), append(td, t3.Sub(t2))
			}
			p, a, d := median(tp), median(ta), median(td)
			b.ReportMetric(float64(p.Microseconds()), "append-µs")
			b.ReportMetric(float64(a)/float64(p), "atomic/append")
			b.ReportMetric(float64(d)/float64(p), "digest/append")
		})
	}
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
