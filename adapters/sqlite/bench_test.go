package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
	"github.com/agentsessions/sessions/session"
)

// The benchmarks compare the adapter with the fastest correct code a user
// could write on the same driver and the same DSN, reading the same database
// file (writing twin files, see twinFiles):
// statements prepared once and held, values scanned into strings, and no
// JSON validation at all. The adapter does more (it validates every row,
// reports unreadable ones, runs every write in a transaction that can be
// undone), so a ratio near 1.00 means that extra work is free.
//
// Single operations are interleaved with internal/testkit/interleave: each
// round runs the adapter and every raw side once, the order rotating, each
// call timed on its own; raw-ns/op and lib-ns/op are medians, x-raw their
// ratio, and allocations are counted apart (raw-allocs/op,
// lib-allocs/op). The throughput benchmark runs raw and adapter one after
// the other and reports batches/s and x-raw-throughput.

// rawDB opens a plain *sql.DB on path with the DSN the Store uses.
func rawDB(b *testing.B, path string, opts Options) *sql.DB {
	b.Helper()
	dsn, err := DSN(path, opts)
	require.NoError(b, err)
	db, err := sql.Open("sqlite", dsn)
	require.NoError(b, err)
	db.SetMaxIdleConns(64)
	b.Cleanup(func() { db.Close() })
	return db
}

// twinFiles opens the adapter's Store on one new file and a raw *sql.DB
// on another with the same schema and settings, for write benchmarks: each
// side then writes the same session ids into its own file, and neither
// inserts into the middle of the other's index, which costs more than
// appending at its right edge and would favour one side.
func twinFiles(b *testing.B, opts Options) (*Store, *sql.DB) {
	b.Helper()
	dir := b.TempDir()
	return openStore(b, filepath.Join(dir, "lib.db"), opts), rawFile(b, filepath.Join(dir, "raw.db"), opts)
}

// rawFile creates the adapter's schema in a new file at path and returns a
// raw *sql.DB on it.
func rawFile(b *testing.B, path string, opts Options) *sql.DB {
	b.Helper()
	schema, err := OpenFile(context.Background(), path, opts)
	require.NoError(b, err)
	require.NoError(b, schema.Close())
	return rawDB(b, path, opts)
}

func prepare(b *testing.B, db interface {
	PrepareContext(context.Context, string) (*sql.Stmt, error)
}, query string) *sql.Stmt {
	b.Helper()
	s, err := db.PrepareContext(context.Background(), query)
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	return s
}

func benchItems(n, size int) []session.Item {
	items := make([]session.Item, n)
	pad := strings.Repeat("x", size)
	for i := range items {
		items[i] = session.MustItem(fmt.Sprintf(`{"type":"message","role":"user","content":"%d %s"}`, i, pad))
	}
	return items
}

// fillSQL appends ?2 items of about 100 bytes to session ?1 in one
// statement (a recursive CTE), as a fixture builder, not as a benchmark.
const fillSQL = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?2)
    INSERT INTO agent_messages (session_id, message_data)
    SELECT ?1, '{"type":"message","role":"user","content":"' || x || ' ' || hex(zeroblob(20)) || '"}' FROM c`

func fill(tb testing.TB, db *sql.DB, id string, n int) {
	tb.Helper()
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `INSERT OR IGNORE INTO agent_sessions (session_id) VALUES (?)`, id)
	require.NoError(tb, err)
	_, err = db.ExecContext(ctx, fillSQL, id, n)
	require.NoError(tb, err)
}

// Fixture files of n items in session "bench", built once per process
// (the 1M one takes a few seconds) and removed by TestMain.
var (
	fixtureMu   sync.Mutex
	fixtureDir  string
	fixtureFile = map[int]string{}
)

func historyFile(b *testing.B, n int) string {
	b.Helper()
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if p, ok := fixtureFile[n]; ok {
		return p
	}
	if fixtureDir == "" {
		d, err := os.MkdirTemp("", "sqlite-bench-")
		require.NoError(b, err)
		fixtureDir = d
	}
	p := filepath.Join(fixtureDir, fmt.Sprintf("history-%d.db", n))
	st, err := OpenFile(context.Background(), p, Options{Synchronous: SyncNormal})
	require.NoError(b, err)
	fill(b, st.DB(), "bench", n)
	// A few neighbours, so that the session is not alone in the index.
	fill(b, st.DB(), "before", 100)
	fill(b, st.DB(), "zafter", 100)
	require.NoError(b, st.Close())
	fixtureFile[n] = p
	return p
}

func removeFixtures() {
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
}

const latestSQL = `SELECT message_data FROM agent_messages WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2`

// rawLatest is what a user would write: the prepared statement, the
// strings the driver returns kept, reversed to oldest first.
func rawLatest(b *testing.B, stmt *sql.Stmt, id string, n int) []string {
	rows, err := stmt.QueryContext(context.Background(), id, n)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]string, 0, n)
	var m string
	for rows.Next() {
		if err := rows.Scan(&m); err != nil {
			b.Fatal(err)
		}
		out = append(out, m)
	}
	if err := closeRows(rows); err != nil {
		b.Fatal(err)
	}
	slices.Reverse(out)
	return out
}

// BenchmarkLatest50 reads the newest 50 items of a session of 1k, 100k and
// 1M items: the cost, and the allocations, must not follow the history.
func BenchmarkLatest50(b *testing.B) {
	for _, history := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("history=%dk", history/1000), func(b *testing.B) {
			ctx := context.Background()
			path := historyFile(b, history)
			st := openStore(b, path, Options{})
			raw := rawDB(b, path, Options{})
			stmt := prepare(b, raw, latestSQL)
			s, err := st.Session("bench")
			require.NoError(b, err)
			interleave.Run(b, nil, func() {
				got, err := s.LatestItems(ctx, 50)
				if err != nil || len(got) != 50 {
					b.Fatal(err, len(got))
				}
			}, interleave.Side{Name: "raw", Op: func() {
				if got := rawLatest(b, stmt, "bench", 50); len(got) != 50 {
					b.Fatal(len(got))
				}
			}})
		})
	}
}

// BenchmarkItems reads whole histories of growing length: ns per item
// should stay flat.
func BenchmarkItems(b *testing.B) {
	for _, history := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("history=%dk", history/1000), func(b *testing.B) {
			ctx := context.Background()
			path := historyFile(b, history)
			st := openStore(b, path, Options{})
			db := rawDB(b, path, Options{})
			stmt := prepare(b, db, `SELECT message_data FROM agent_messages WHERE session_id = ?1 ORDER BY id`)
			s, err := st.Session("bench")
			require.NoError(b, err)
			raw := func() {
				rows, err := stmt.QueryContext(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				var out []string
				var m string
				for rows.Next() {
					if err := rows.Scan(&m); err != nil {
						b.Fatal(err)
					}
					out = append(out, m)
				}
				if err := closeRows(rows); err != nil || len(out) != history {
					b.Fatal(err, len(out))
				}
			}
			med := interleave.Run(b, nil, func() {
				got, err := s.Items(ctx)
				if err != nil || len(got) != history {
					b.Fatal(err, len(got))
				}
			}, interleave.Side{Name: "raw", Op: raw})
			b.ReportMetric(med["raw"]/float64(history), "raw-ns/item")
			b.ReportMetric(med[interleave.Lib]/float64(history), "lib-ns/item")
		})
	}
}

// popSQL is the one statement a user would pop with.
const popSQL = `DELETE FROM agent_messages WHERE id = (SELECT id FROM agent_messages WHERE session_id = ?1 ORDER BY id DESC LIMIT 1) RETURNING message_data`

// BenchmarkPop pops the newest item: raw with its one prepared DELETE ...
// RETURNING in autocommit, the adapter with its transaction that could undo
// the delete of an unreadable row.
func BenchmarkPop(b *testing.B) {
	for _, mode := range []Synchronous{SyncNormal, SyncFull} {
		b.Run("sync="+string(mode), func(b *testing.B) {
			ctx := context.Background()
			st, raw := twinFiles(b, Options{Synchronous: mode})
			stmt := prepare(b, raw, popSQL)
			s, err := st.Session("s")
			require.NoError(b, err)
			const refill = 5_000
			left := 0
			interleave.Run(b, func() {
				if left == 0 {
					fill(b, raw, "s", refill)
					fill(b, st.DB(), "s", refill)
					left = refill
				}
				left--
			}, func() {
				if _, ok, err := s.PopItem(ctx); err != nil || !ok {
					b.Fatal(err, ok)
				}
			}, interleave.Side{Name: "raw", Op: func() {
				var m string
				if err := stmt.QueryRowContext(ctx, "s").Scan(&m); err != nil {
					b.Fatal(err)
				}
			}})
		})
	}
}

// rawWriter is one writer's connection with its statements prepared: the
// tightest one-transaction-per-batch code.
type rawWriter struct {
	c                             *sql.Conn
	begin, upsert, insert, commit *sql.Stmt
	rollback                      *sql.Stmt
	args                          []any
	busyTimeout                   time.Duration
	retries                       atomic.Int64
}

func newRawWriter(b *testing.B, db *sql.DB, st *Store, batchLen int) *rawWriter {
	b.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	require.NoError(b, err)
	b.Cleanup(func() { c.Close() })
	return &rawWriter{
		c:           c,
		begin:       prepare(b, c, "BEGIN IMMEDIATE"),
		upsert:      prepare(b, c, st.q.upsertSession),
		insert:      prepare(b, c, st.q.insertSQL(batchLen)),
		commit:      prepare(b, c, "COMMIT"),
		rollback:    prepare(b, c, "ROLLBACK"),
		busyTimeout: rawBusyRetry,
	}
}

// rawBusyRetry is how long a raw writer retries a BEGIN IMMEDIATE that
// returns BUSY: longer than the connection's busy_timeout, because on a
// loaded machine SQLite's busy handler (which sleeps, and is not fair) can
// leave one of 16 writers waiting past it while the others commit.
const rawBusyRetry = time.Minute

// append writes one batch in its own transaction; BEGIN IMMEDIATE waits
// for the lock through the connection's busy_timeout, and is retried on
// the rare BUSY it still returns, as careful raw code must.
func (w *rawWriter) append(ctx context.Context, id string, batch []session.Item) error {
	return w.appendWith(ctx, id, batch, nil)
}

// appendWith is append with first run inside the transaction, before the
// session upsert (nil: nothing).
func (w *rawWriter) appendWith(ctx context.Context, id string, batch []session.Item, first func() error) error {
	start := time.Now()
	for {
		_, err := w.begin.ExecContext(ctx)
		if err == nil {
			break
		}
		if !isBusy(err) || time.Since(start) > w.busyTimeout {
			return err
		}
		w.retries.Add(1)
	}
	w.args = append(w.args[:0], id)
	for _, it := range batch {
		w.args = append(w.args, it.String())
	}
	if first != nil {
		if err := first(); err != nil {
			w.rollback.ExecContext(ctx)
			return err
		}
	}
	if _, err := w.upsert.ExecContext(ctx, id); err != nil {
		w.rollback.ExecContext(ctx)
		return err
	}
	if _, err := w.insert.ExecContext(ctx, w.args...); err != nil {
		w.rollback.ExecContext(ctx)
		return err
	}
	_, err := w.commit.ExecContext(ctx)
	return err
}

// BenchmarkAppend20 appends a 20-item batch at equal durability, each side
// on a file of its own with the same synchronous setting. raw: one prepared
// 20-row INSERT in autocommit, the session row created beforehand (the
// least a user could write: no transaction of its own, no session row kept
// up to date). raw-schema: what the adapter's schema asks of raw code,
// BEGIN IMMEDIATE, the session upsert, the prepared 20-row INSERT, COMMIT
// (rawWriter). x-raw and x-raw-schema are the adapter's ratios to each.
func BenchmarkAppend20(b *testing.B) {
	for _, mode := range []Synchronous{SyncNormal, SyncFull} {
		b.Run("sync="+string(mode), func(b *testing.B) {
			ctx := context.Background()
			opts := Options{Synchronous: mode}
			st, rawSchema := twinFiles(b, opts)
			raw := rawFile(b, filepath.Join(b.TempDir(), "raw-insert.db"), opts)
			batch := benchItems(20, 40)
			w := newRawWriter(b, rawSchema, st, len(batch))
			_, err := raw.ExecContext(ctx, st.q.upsertSession, "s")
			require.NoError(b, err)
			insert := prepare(b, raw, st.q.insertSQL(len(batch)))
			args := make([]any, 0, len(batch)+1)
			s, err := st.Session("s")
			require.NoError(b, err)
			interleave.Run(b, nil, func() {
				if err := s.AddItems(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}, interleave.Side{Name: "raw", Op: func() {
				args = append(args[:0], "s")
				for _, it := range batch {
					args = append(args, it.String())
				}
				if _, err := insert.ExecContext(ctx, args...); err != nil {
					b.Fatal(err)
				}
			}}, interleave.Side{Name: "raw-schema", Op: func() {
				if err := w.append(ctx, "s", batch); err != nil {
					b.Fatal(err)
				}
			}})
		})
	}
}

// BenchmarkAppendWithCheckpoint20 is the atomic commit of a crash-safe
// save (a 20-item batch and a 137-byte checkpoint in one transaction) at
// synchronous NORMAL, each side on a file of its own. raw-schema: the
// append alone as raw code on the schema writes it (rawWriter);
// raw-checkpoint: the same transaction with the checkpoint's versioned
// UPDATE before the insert, the least raw code can do for the same
// guarantee. raw-checkpoint ÷ raw-schema is the commit's floor: one more
// row, one more page for the WAL.
func BenchmarkAppendWithCheckpoint20(b *testing.B) {
	ctx := context.Background()
	opts := Options{Synchronous: SyncNormal}
	st, rawSchema := twinFiles(b, opts)
	rawCk := rawFile(b, filepath.Join(b.TempDir(), "raw-checkpoint.db"), opts)
	batch := benchItems(20, 40)
	doc := []byte(`{"$schemaVersion":"1.18","current_step":{"type":"next_step_run_again"},"current_turn_persisted_item_count":20,"x":"` + strings.Repeat("p", 20) + `"}`)
	s, err := st.Session("s")
	require.NoError(b, err)
	v, err := s.SaveCheckpoint(ctx, "run", doc, 0)
	require.NoError(b, err)
	plain := newRawWriter(b, rawSchema, st, len(batch))
	ck := newRawWriter(b, rawCk, st, len(batch))
	_, err = rawCk.ExecContext(ctx, st.q.ck.create)
	require.NoError(b, err)
	_, err = rawCk.ExecContext(ctx, st.q.ck.insert, "s", "run", doc)
	require.NoError(b, err)
	update := prepare(b, ck.c, st.q.ck.update)
	rawVersion := int64(1)
	interleave.Run(b, nil, func() {
		var err error
		if v, err = s.AppendWithCheckpoint(ctx, batch, "run", doc, v); err != nil {
			b.Fatal(err)
		}
	}, interleave.Side{Name: "raw-schema", Op: func() {
		if err := plain.append(ctx, "s", batch); err != nil {
			b.Fatal(err)
		}
	}}, interleave.Side{Name: "raw-checkpoint", Op: func() {
		if err := ck.appendWith(ctx, "s", batch, func() error {
			res, err := update.ExecContext(ctx, "s", "run", doc, rawVersion)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("checkpoint at version %d: %d rows, %v", rawVersion, n, err)
			}
			rawVersion++
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}})
}

// BenchmarkConcurrentAppend: W goroutines append 5-item batches, each to a
// session of its own, for b.N batches in all. Raw: each goroutine has its
// own connection and prepared statements and one transaction per batch,
// contending for SQLite's lock. Adapter: one Store, group commit. Both are
// warmed up, then measured in ABBA order (raw, adapter, adapter, raw, each
// half of b.N). Reported: batches/s of each, x-raw-throughput (adapter /
// raw), and the adapter's batches per transaction.
func BenchmarkConcurrentAppend(b *testing.B) {
	for _, mode := range []Synchronous{SyncFull, SyncNormal} {
		for _, writers := range []int{1, 2, 4, 8, 16, 32} {
			b.Run(fmt.Sprintf("sync=%s/writers=%d", mode, writers), func(b *testing.B) {
				ctx := context.Background()
				st, raw := twinFiles(b, Options{Synchronous: mode})
				raw.SetMaxOpenConns(writers + 1)
				batch := benchItems(5, 40)
				ws := make([]*rawWriter, writers)
				ss := make([]*Session, writers)
				for i := range ws {
					ws[i] = newRawWriter(b, raw, st, len(batch))
					var err error
					ss[i], err = st.Session(fmt.Sprintf("s-%d", i))
					require.NoError(b, err)
				}
				// run does total batches with W goroutines and returns the
				// time it took, adding the process's CPU time to *cpu.
				run := func(total int, cpu *time.Duration, op func(g int) error) time.Duration {
					c0 := cpuTime()
					defer func() { *cpu += cpuTime() - c0 }()
					var next atomic.Int64
					var wg sync.WaitGroup
					errs := make(chan error, writers)
					start := time.Now()
					for g := range writers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for next.Add(1) <= int64(total) {
								if err := op(g); err != nil {
									errs <- err
									return
								}
							}
						}()
					}
					wg.Wait()
					elapsed := time.Since(start)
					close(errs)
					for err := range errs {
						b.Fatal(err)
					}
					return elapsed
				}
				rawOp := func(g int) error { return ws[g].append(ctx, fmt.Sprintf("s-%d", g), batch) }
				libOp := func(g int) error { return ss[g].AddItems(ctx, batch) }
				// Warm up both (statements prepared, WAL file grown), then
				// measure in ABBA order, so that drift favours neither.
				var warm time.Duration
				run(4*writers, &warm, rawOp)
				run(4*writers, &warm, libOp)
				b.ResetTimer()
				h1 := b.N / 2
				h2 := b.N - h1
				tx0, n0 := st.Stats()
				var rawCPU, libCPU time.Duration
				rawT := run(h1, &rawCPU, rawOp)
				libT := run(h1, &libCPU, libOp)
				libT += run(h2, &libCPU, libOp)
				rawT += run(h2, &rawCPU, rawOp)
				tx1, n1 := st.Stats()
				b.StopTimer()
				rawRate := float64(b.N) / rawT.Seconds()
				libRate := float64(b.N) / libT.Seconds()
				b.ReportMetric(rawRate, "raw-batches/s")
				b.ReportMetric(libRate, "lib-batches/s")
				b.ReportMetric(libRate/rawRate, "x-raw-throughput")
				if rawCPU > 0 {
					b.ReportMetric(float64(rawCPU.Nanoseconds())/float64(b.N), "raw-cpu-ns/batch")
					b.ReportMetric(float64(libCPU.Nanoseconds())/float64(b.N), "lib-cpu-ns/batch")
				}
				if tx1 > tx0 {
					b.ReportMetric(float64(n1-n0)/float64(tx1-tx0), "batches/tx")
				}
			})
		}
	}
}

// BenchmarkItemsSince4 reads the 4 items after a cursor at the end of a
// session of 10k items, against the raw query a user would write (the
// rows after an id, prepared, scanned into strings): the cost must follow
// the 4, not the 10k.
func BenchmarkItemsSince4(b *testing.B) {
	ctx := context.Background()
	path := historyFile(b, 10_000)
	st := openStore(b, path, Options{})
	raw := rawDB(b, path, Options{})
	stmt := prepare(b, raw, `SELECT message_data FROM agent_messages WHERE session_id = ?1 AND id > ?2 ORDER BY id`)
	var at int64
	require.NoError(b, raw.QueryRowContext(ctx, `SELECT id FROM agent_messages WHERE session_id = 'bench' ORDER BY id DESC LIMIT 1 OFFSET 4`).Scan(&at))
	cursor := st.q.fq.format("bench", position{r: at, rID: at, x: at})
	s, err := st.Session("bench")
	require.NoError(b, err)
	interleave.Run(b, nil, func() {
		got, _, err := s.ItemsSince(ctx, cursor)
		if err != nil || len(got) != 4 {
			b.Fatal(err, len(got))
		}
	}, interleave.Side{Name: "raw", Op: func() {
		rows, err := stmt.QueryContext(ctx, "bench", at)
		if err != nil {
			b.Fatal(err)
		}
		out := make([]string, 0, 4)
		var m string
		for rows.Next() {
			if err := rows.Scan(&m); err != nil {
				b.Fatal(err)
			}
			out = append(out, m)
		}
		if err := closeRows(rows); err != nil || len(out) != 4 {
			b.Fatal(err, len(out))
		}
	}})
}
