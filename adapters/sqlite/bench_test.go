package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// The benchmarks compare the adapter with plain database/sql on the same
// driver, the same DSN and the same database, doing the least work that
// gives the same result: raw appends send the same statements in one
// transaction, and raw reads keep only the rows that are JSON objects, as
// the adapter must. Each benchmark runs raw first, then adapter, and the
// adapter reports its cost as a multiple of raw's: x-raw-ns and
// x-raw-allocs (1.00 = no overhead). Both also report cpu-ns/op, the
// process's CPU time per operation, and the adapter x-raw-cpu: on a machine
// shared with other work, wall-clock ns/op also counts waiting for a CPU,
// and the CPU-time ratio is the steadier one.

// rawResult is the last raw measurement, read by the adapter sub-benchmark
// that follows it.
type rawResult struct{ ns, allocs, cpu float64 }

// measure runs fn b.N times and returns ns/op and allocs/op as the testing
// package counts them.
func measure(b *testing.B, fn func()) rawResult {
	b.Helper()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		fn()
	}
	b.StopTimer()
	cpu = cpuTime() - cpu
	runtime.ReadMemStats(&after)
	r := rawResult{
		ns:     float64(b.Elapsed().Nanoseconds()) / float64(b.N),
		allocs: float64(after.Mallocs-before.Mallocs) / float64(b.N),
		cpu:    float64(cpu.Nanoseconds()) / float64(b.N),
	}
	if r.cpu > 0 {
		b.ReportMetric(r.cpu, "cpu-ns/op")
	}
	return r
}

// pair runs the raw and adapter variants as sub-benchmarks and reports
// the ratios on the adapter's line.
func pair(b *testing.B, raw, adapter func()) {
	var r rawResult
	b.Run("raw", func(b *testing.B) { r = measure(b, raw) })
	b.Run("adapter", func(b *testing.B) {
		a := measure(b, adapter)
		if r.ns > 0 {
			b.ReportMetric(a.ns/r.ns, "x-raw-ns")
		}
		if r.allocs > 0 {
			b.ReportMetric(a.allocs/r.allocs, "x-raw-allocs")
		}
		if r.cpu > 0 && a.cpu > 0 {
			b.ReportMetric(a.cpu/r.cpu, "x-raw-cpu")
		}
	})
}

// benchDB opens a Store on a new file database (or ":memory:") and a raw
// *sql.DB on the same database with the same DSN; for ":memory:", raw is
// the Store's own *sql.DB, as no other connection can reach it.
func benchDB(b *testing.B, memory bool) (*Store, *sql.DB) {
	b.Helper()
	path := ":memory:"
	if !memory {
		path = filepath.Join(b.TempDir(), "bench.db")
	}
	st := openStore(b, path, Options{})
	if memory {
		return st, st.DB()
	}
	dsn, err := DSN(path, Options{})
	require.NoError(b, err)
	raw, err := sql.Open("sqlite", dsn)
	require.NoError(b, err)
	b.Cleanup(func() { raw.Close() })
	return st, raw
}

// jsonObject is the least check that keeps corrupt rows out: valid
// UTF-8 JSON whose value is an object.
func jsonObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b) && utf8.Valid(b)
}

func benchItems(n, size int) []session.Item {
	items := make([]session.Item, n)
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := range items {
		items[i] = session.MustItem(fmt.Sprintf(`{"type":"message","role":"user","content":"%d %s"}`, i, pad))
	}
	return items
}

// fill appends n items of about 100 bytes to session id in one
// transaction.
func fill(b *testing.B, db *sql.DB, id string, n int) {
	b.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(b, err)
	_, err = tx.ExecContext(ctx, `INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)`, id)
	require.NoError(b, err)
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)`)
	require.NoError(b, err)
	for _, it := range benchItems(n, 40) {
		_, err = stmt.ExecContext(ctx, id, it.String())
		require.NoError(b, err)
	}
	require.NoError(b, stmt.Close())
	require.NoError(b, tx.Commit())
}

func BenchmarkAppend20(b *testing.B) {
	for _, memory := range []bool{false, true} {
		name := "file"
		if memory {
			name = "memory"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st, raw := benchDB(b, memory)
			batch := benchItems(20, 40)
			// Both append to one session, so that both write at the same
			// end of the (session_id, id) index.
			rawID := "bench"
			s, err := st.Session(rawID)
			require.NoError(b, err)
			insert := st.q.insertSQL(len(batch))
			upsert := st.q.upsertSession
			args := make([]any, 0, len(batch)+1)
			pair(b, func() {
				// The same statements the adapter sends, hand-written.
				c, err := raw.Conn(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
					b.Fatal(err)
				}
				if _, err := c.ExecContext(ctx, upsert, rawID); err != nil {
					b.Fatal(err)
				}
				args = append(args[:0], rawID)
				for _, it := range batch {
					args = append(args, string(it.Bytes()))
				}
				if _, err := c.ExecContext(ctx, insert, args...); err != nil {
					b.Fatal(err)
				}
				if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
					b.Fatal(err)
				}
			}, func() {
				if err := s.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkLatest50(b *testing.B) {
	for _, history := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("history=%dk", history/1000), func(b *testing.B) {
			ctx := context.Background()
			st, raw := benchDB(b, false)
			id := "bench"
			fill(b, raw, id, history)
			s, err := st.Session(id)
			require.NoError(b, err)
			const q = `SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id DESC LIMIT ?`
			pair(b, func() {
				rows, err := raw.QueryContext(ctx, q, id, 50)
				if err != nil {
					b.Fatal(err)
				}
				out := make([][]byte, 0, 50)
				var m []byte
				for rows.Next() {
					if err := rows.Scan(&m); err != nil {
						b.Fatal(err)
					}
					if jsonObject(m) {
						out = append(out, m)
					}
				}
				if err := closeRows(rows); err != nil || len(out) != 50 {
					b.Fatal(err, len(out))
				}
				for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
					out[i], out[j] = out[j], out[i]
				}
			}, func() {
				got, err := s.LatestItems(ctx, 50)
				if err != nil || len(got) != 50 {
					b.Fatal(err, len(got))
				}
			})
		})
	}
}

func BenchmarkItems1k(b *testing.B) {
	ctx := context.Background()
	st, raw := benchDB(b, false)
	id := "bench"
	fill(b, raw, id, 1000)
	s, err := st.Session(id)
	require.NoError(b, err)
	const q = `SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id`
	pair(b, func() {
		rows, err := raw.QueryContext(ctx, q, id)
		if err != nil {
			b.Fatal(err)
		}
		var out [][]byte
		var m []byte
		for rows.Next() {
			if err := rows.Scan(&m); err != nil {
				b.Fatal(err)
			}
			if jsonObject(m) {
				out = append(out, m)
			}
		}
		if err := closeRows(rows); err != nil || len(out) != 1000 {
			b.Fatal(err, len(out))
		}
	}, func() {
		got, err := s.Items(ctx)
		if err != nil || len(got) != 1000 {
			b.Fatal(err, len(got))
		}
	})
}
