package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// The benchmarks compare the adapter with plain pgx on the same pool, the
// same tables and the same sessions, doing the least work that gives the
// same result:
//
//	append 20   raw: one batch (one round trip, one implicit transaction)
//	            of the session upsert and one 20-row INSERT, prepared
//	latest 50   raw: one prepared SELECT ... ORDER BY id DESC LIMIT 50,
//	            copying each message_data into a string (no JSON check:
//	            raw is strictly less work than the adapter's)
//	pop         raw: one prepared DELETE ... RETURNING in autocommit (one
//	            round trip; it would delete a corrupt row, which the
//	            adapter never does)
//
// The machine these run on is shared, so raw and adapter calls alternate
// within one loop (swapping which goes first each time), each timed on its
// own: a burst of load hits both alike. The benchmark reports raw-ns/op and
// adapter-ns/op (its ns/op is their sum), x-raw-ns = adapter / raw (1.00 =
// no overhead), x-raw-median = the ratio of the median single-call times
// (which a few calls stalled by other processes do not move), and
// x-raw-allocs from testing.AllocsPerRun of each.

// pair runs raw and adapter b.N times each, alternating, and reports the
// ratios. setup, when set, runs first, untimed, with room for 2*b.N calls.
func pair(b *testing.B, setup func(n int), raw, adapter func()) {
	b.Helper()
	if setup != nil {
		setup(2*b.N + 2*allocRuns + 2)
	}
	raw() // warm both up: prepared statements, pool connections
	adapter()
	var tr, ta time.Duration
	dr, da := make([]time.Duration, b.N), make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		first, second, d1, d2 := raw, adapter, &dr[i], &da[i]
		if i%2 == 1 {
			first, second, d1, d2 = adapter, raw, &da[i], &dr[i]
		}
		start := time.Now()
		first()
		mid := time.Now()
		second()
		*d1 = mid.Sub(start)
		*d2 = time.Since(mid)
		tr += dr[i]
		ta += da[i]
	}
	b.StopTimer()
	slices.Sort(dr)
	slices.Sort(da)
	b.ReportMetric(float64(da[b.N/2])/float64(dr[b.N/2]), "x-raw-median")
	rawAllocs := testing.AllocsPerRun(allocRuns, raw)
	adapterAllocs := testing.AllocsPerRun(allocRuns, adapter)
	n := float64(b.N)
	b.ReportMetric(float64(tr.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(float64(ta.Nanoseconds())/n, "adapter-ns/op")
	b.ReportMetric(float64(ta)/float64(tr), "x-raw-ns")
	if rawAllocs > 0 {
		b.ReportMetric(adapterAllocs/rawAllocs, "x-raw-allocs")
	}
}

// allocRuns is how many calls of each variant testing.AllocsPerRun makes.
const allocRuns = 20

// seed gives session sid n rows of a 200-byte message, with SQL.
func seed(b *testing.B, st *Store, sid string, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := st.Pool().Exec(ctx, `INSERT INTO `+st.q.sessions+` (session_id) VALUES ($1) ON CONFLICT DO NOTHING`, sid)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `INSERT INTO `+st.q.messages+` (session_id, message_data)
		SELECT $1, '{"type":"message","role":"user","content":"' || g || ' ' || repeat('x', 150) || '"}' FROM generate_series(1, $2::int) AS g`, sid, n)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE `+st.q.messages)
	require.NoError(b, err)
}

func benchItems(n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.MustItem(fmt.Sprintf(`{"type":"message","role":"assistant","content":"item %d of a turn, long enough to look like a real message of a conversation with a model"}`, i))
	}
	return out
}

func BenchmarkAppend20(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, Options{})
	items := benchItems(20)
	data := texts(items)
	pool := st.Pool()
	q := st.q
	s, err := st.Session("bench-append")
	require.NoError(b, err)
	pair(b, nil, func() {
		var batch pgx.Batch
		batch.Queue(q.upsertSession, "bench-append")
		batch.Queue(q.insert, "bench-append", data)
		if err := pool.SendBatch(ctx, &batch).Close(); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if err := s.AddItems(ctx, items); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkLatest50(b *testing.B) {
	for _, size := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			ctx := context.Background()
			st := openStore(b, Options{})
			sid := "bench-latest"
			seed(b, st, "other-before", size/10)
			seed(b, st, sid, size)
			seed(b, st, "other-after", size/10)
			pool := st.Pool()
			// The adapter's statement, which the planner serves from the
			// (session_id, created_at, id) index even when the session is
			// most of the table.
			latest := st.q.latestTop
			s, err := st.Session(sid)
			require.NoError(b, err)
			pair(b, nil, func() {
				rows, err := pool.Query(ctx, latest, sid, int64(50))
				if err != nil {
					b.Fatal(err)
				}
				out := make([]string, 0, 50)
				for rows.Next() {
					out = append(out, string(rows.RawValues()[1]))
				}
				if rows.Err() != nil || len(out) != 50 {
					b.Fatal(rows.Err(), len(out))
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

func BenchmarkPop(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, Options{})
	pool := st.Pool()
	q := st.q
	s, err := st.Session("bench-pop")
	require.NoError(b, err)
	rawPop := `DELETE FROM ` + q.messages + ` WHERE id = (SELECT id FROM ` + q.messages + `
		WHERE session_id >= $1 AND session_id <= $1 ORDER BY session_id DESC, id DESC LIMIT 1) RETURNING id, message_data`
	setup := func(n int) {
		_, err := pool.Exec(ctx, q.clearMessages, "bench-pop")
		require.NoError(b, err)
		seed(b, st, "bench-pop", n+1000)
	}
	pair(b, setup, func() {
		var id int64
		var data string
		if err := pool.QueryRow(ctx, rawPop, "bench-pop").Scan(&id, &data); err != nil {
			b.Fatal(err)
		}
	}, func() {
		_, ok, err := s.PopItem(ctx)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
	})
}

// BenchmarkItemsSince4 reads the 4 items after a cursor at the end of a
// session of 10k items; raw is the tightest query a user would write on
// the same index (prepared by pgx's statement cache, each message_data
// scanned into a string, no JSON check, no check of the cursor's row):
// the rows after a (created_at, id).
func BenchmarkItemsSince4(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, Options{})
	sid := "bench-since"
	seed(b, st, "other-before", 1000)
	seed(b, st, sid, 10_000)
	seed(b, st, "other-after", 1000)
	pool := st.Pool()
	var p position
	require.NoError(b, pool.QueryRow(ctx, `SELECT id, to_char(created_at, '`+cursorTimeFormat+`') FROM `+st.q.messages+`
		WHERE session_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET 4`, sid).Scan(&p.rID, &p.rAt))
	p.xID, p.xAt = p.rID, p.rAt
	cursor := formatCursor(sid, p)
	// The adapter's predicate (the plain "session_id = $1 AND (created_at,
	// id) > (...)" gets a bitmap scan and a sort here, slower than both).
	rawSince := `SELECT message_data FROM ` + st.q.messages + ` WHERE session_id >= $1 AND session_id <= $1
		AND (session_id, created_at, id) > ($1, $2::timestamp, $3::bigint) ORDER BY session_id, created_at, id`
	s, err := st.Session(sid)
	require.NoError(b, err)
	pair(b, nil, func() {
		rows, err := pool.Query(ctx, rawSince, sid, p.rAt, p.rID)
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
		if rows.Err() != nil || len(out) != 4 {
			b.Fatal(rows.Err(), len(out))
		}
	}, func() {
		got, _, err := s.ItemsSince(ctx, cursor)
		if err != nil || len(got) != 4 {
			b.Fatal(err, len(got))
		}
	})
}
