package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkAppend20Shapes times, interleaved op by op on three twin files,
// a 20-item append as the adapter does it (AddItems: the group-commit
// writer's BEGIN IMMEDIATE, session upsert, multi-row insert, COMMIT), the
// same transaction written raw on a held connection, and the lower bound
// the issue measures against: the one prepared 20-row INSERT in autocommit,
// which keeps no session row. Reported: each median over the bound's, and
// the adapter's over the raw transaction's.
func BenchmarkAppend20Shapes(b *testing.B) {
	for _, mode := range []Synchronous{SyncNormal, SyncFull} {
		b.Run("sync="+string(mode), func(b *testing.B) {
			ctx := context.Background()
			st, raw := twinFiles(b, Options{Synchronous: mode})
			_, one := twinFiles(b, Options{Synchronous: mode})
			batch := benchItems(20, 40)
			w := newRawWriter(b, raw, st, len(batch))
			ins := prepare(b, one, st.q.insertSQL(len(batch)))
			_, err := one.ExecContext(ctx, `INSERT INTO agent_sessions (session_id) VALUES ('s')`)
			require.NoError(b, err)
			args := []any{"s"}
			for _, it := range batch {
				args = append(args, it.String())
			}
			s, err := st.Session("s")
			require.NoError(b, err)
			var t1s, txs, libs []time.Duration
			i := 0
			for b.Loop() {
				sides := [3]func(){
					func() {
						if _, err := ins.ExecContext(ctx, args...); err != nil {
							b.Fatal(err)
						}
					},
					func() {
						if err := w.append(ctx, "s", batch); err != nil {
							b.Fatal(err)
						}
					},
					func() {
						if err := s.AddItems(ctx, batch); err != nil {
							b.Fatal(err)
						}
					},
				}
				var d [3]time.Duration
				for k := range 3 {
					j := (i + k) % 3
					t0 := time.Now()
					sides[j]()
					d[j] = time.Since(t0)
				}
				i++
				t1s, txs, libs = append(t1s, d[0]), append(txs, d[1]), append(libs, d[2])
			}
			one1, tx, lib := median(t1s), median(txs), median(libs)
			b.ReportMetric(float64(one1.Microseconds()), "insert-µs")
			b.ReportMetric(float64(tx)/float64(one1), "rawtx/insert")
			b.ReportMetric(float64(lib)/float64(one1), "lib/insert")
			b.ReportMetric(float64(lib)/float64(tx), "lib/rawtx")
			_ = fmt.Sprint()
		})
	}
}
