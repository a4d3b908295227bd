package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
	"github.com/agentsessions/sessions/session"
)

// The benchmarks compare the adapter with plain pgx on the same pool and
// the same server, each side on a session of its own, interleaved op by op
// with internal/testkit/interleave (medians per side; x-raw and
// x-raw-schema are the adapter's ratios to each raw side). There are two
// raw sides, so that the cost of the Python-compatible schema and the
// cost of the library are told apart:
//
//	raw         the tightest code on a minimal table of its own,
//	            raw_messages (id BIGSERIAL PRIMARY KEY, session_id TEXT,
//	            message_data TEXT) with an index on (session_id, id)
//	raw-schema  the tightest code on the adapter's own tables (the
//	            session row, created_at, the foreign key, the
//	            (session_id, created_at, id) index), in the adapter's order
//
//	append 20   raw: one prepared 20-row INSERT ... VALUES in autocommit
//	            raw-schema: one batch (one round trip, one implicit
//	            transaction) of the session upsert and the same 20-row
//	            INSERT into the adapter's table (created_at by default)
//	latest 50   one prepared SELECT of the newest 50 in the range form
//	            session_id >= $1 AND session_id <= $1 (with = $1 ORDER BY
//	            id DESC, PostgreSQL may walk the primary key past other
//	            sessions' rows), each message_data scanned into a string,
//	            reversed to oldest first; no JSON check
//	pop         one prepared DELETE ... RETURNING of the newest row in
//	            autocommit (it would delete a corrupt row, which the
//	            adapter never does)
//
// The machine these run on is shared: a burst of load hits every side of a
// round alike, and medians ignore the few calls it stalls.

// benchStore opens a Store on a fresh schema and creates the minimal raw
// table in that schema; it returns the store and the raw table's name.
func benchStore(b *testing.B) (*Store, string) {
	b.Helper()
	schema := freshSchema(b)
	st := openStore(b, Options{Schema: schema})
	raw := quote(schema) + ".raw_messages"
	ctx := context.Background()
	_, err := st.Pool().Exec(ctx, `CREATE TABLE `+raw+` (id BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, message_data TEXT NOT NULL)`)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `CREATE INDEX ON `+raw+` (session_id, id)`)
	require.NoError(b, err)
	return st, raw
}

// seedRaw gives session sid of the minimal table raw n rows of the
// message seed writes.
func seedRaw(b *testing.B, st *Store, raw, sid string, n int) {
	b.Helper()
	ctx := context.Background()
	_, err := st.Pool().Exec(ctx, `INSERT INTO `+raw+` (session_id, message_data)
		SELECT $1, '{"type":"message","role":"user","content":"' || g || ' ' || repeat('x', 150) || '"}' FROM generate_series(1, $2::int) AS g`, sid, n)
	require.NoError(b, err)
	_, err = st.Pool().Exec(ctx, `ANALYZE `+raw)
	require.NoError(b, err)
}

// valuesInsert returns INSERT INTO table (session_id, message_data) VALUES
// ($1, $2), ($1, $3), ... for n rows.
func valuesInsert(table string, n int) string {
	var sb strings.Builder
	sb.WriteString(`INSERT INTO ` + table + ` (session_id, message_data) VALUES `)
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "($1, $%d)", i+2)
	}
	return sb.String()
}

// scanStrings runs a prepared query and returns its one text column,
// reversed when reverse is set; want is the number of rows expected.
func scanStrings(b *testing.B, pool *pgxpool.Pool, query string, want int, reverse bool, args ...any) {
	rows, err := pool.Query(context.Background(), query, args...)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]string, 0, want)
	var m string
	for rows.Next() {
		if err := rows.Scan(&m); err != nil {
			b.Fatal(err)
		}
		out = append(out, m)
	}
	if rows.Err() != nil || len(out) != want {
		b.Fatal(rows.Err(), len(out))
	}
	if reverse {
		slices.Reverse(out)
	}
}

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

// BenchmarkAppend20 appends a 20-item batch (see the sides above).
func BenchmarkAppend20(b *testing.B) {
	ctx := context.Background()
	st, raw := benchStore(b)
	items := benchItems(20)
	data := texts(items)
	pool := st.Pool()
	q := st.q
	args := make([]any, 0, len(data)+1)
	rawInsert := valuesInsert(raw, len(data))
	schemaInsert := valuesInsert(q.messages, len(data))
	s, err := st.Session("bench-append")
	require.NoError(b, err)
	interleave.Run(b, nil, func() {
		if err := s.AddItems(ctx, items); err != nil {
			b.Fatal(err)
		}
	}, interleave.Side{Name: "raw", Op: func() {
		args = append(args[:0], "raw-append")
		for _, d := range data {
			args = append(args, d)
		}
		if _, err := pool.Exec(ctx, rawInsert, args...); err != nil {
			b.Fatal(err)
		}
	}}, interleave.Side{Name: "raw-schema", Op: func() {
		args = append(args[:0], "schema-append")
		for _, d := range data {
			args = append(args, d)
		}
		var batch pgx.Batch
		batch.Queue(q.upsertSession, "schema-append")
		batch.Queue(schemaInsert, args...)
		if err := pool.SendBatch(ctx, &batch).Close(); err != nil {
			b.Fatal(err)
		}
	}})
}

// BenchmarkLatest50 reads the newest 50 items of a session of 1k and 100k
// items, with a tenth of that in a session before it and one after it, in
// both the adapter's tables and the minimal one.
func BenchmarkLatest50(b *testing.B) {
	for _, size := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			ctx := context.Background()
			st, raw := benchStore(b)
			for _, sid := range []string{"bench-latest-a", "bench-latest", "bench-latest-z"} {
				n := size
				if sid != "bench-latest" {
					n = size / 10
				}
				seed(b, st, sid, n)
				seedRaw(b, st, raw, sid, n)
			}
			pool := st.Pool()
			rawLatest := `SELECT message_data FROM ` + raw + ` WHERE session_id >= $1 AND session_id <= $1
				ORDER BY session_id DESC, id DESC LIMIT $2`
			schemaLatest := `SELECT message_data FROM ` + st.q.messages + ` WHERE session_id >= $1 AND session_id <= $1
				ORDER BY session_id DESC, created_at DESC, id DESC LIMIT $2`
			s, err := st.Session("bench-latest")
			require.NoError(b, err)
			interleave.Run(b, nil, func() {
				got, err := s.LatestItems(ctx, 50)
				if err != nil || len(got) != 50 {
					b.Fatal(err, len(got))
				}
			}, interleave.Side{Name: "raw", Op: func() {
				scanStrings(b, pool, rawLatest, 50, true, "bench-latest", int64(50))
			}}, interleave.Side{Name: "raw-schema", Op: func() {
				scanStrings(b, pool, schemaLatest, 50, true, "bench-latest", int64(50))
			}})
		})
	}
}

// rawSchemaPop is the tightest raw pop on the adapter's tables: one
// DELETE ... RETURNING of the session's newest row, in the range form.
func rawSchemaPop(q *queries) string {
	return `DELETE FROM ` + q.messages + ` WHERE id = (SELECT id FROM ` + q.messages + `
		WHERE session_id >= $1 AND session_id <= $1 ORDER BY session_id DESC, created_at DESC, id DESC LIMIT 1) RETURNING message_data`
}

// BenchmarkPop pops the newest item of a session of a few thousand, each
// side its own session.
func BenchmarkPop(b *testing.B) {
	ctx := context.Background()
	st, raw := benchStore(b)
	pool := st.Pool()
	q := st.q
	s, err := st.Session("bench-pop")
	require.NoError(b, err)
	n := b.N + 2000 // every call of the timed rounds, the warm-up and the allocation count
	seed(b, st, "bench-pop", n)
	seed(b, st, "schema-pop", n)
	seedRaw(b, st, raw, "raw-pop", n)
	rawPop := `DELETE FROM ` + raw + ` WHERE id = (SELECT id FROM ` + raw + `
		WHERE session_id >= $1 AND session_id <= $1 ORDER BY session_id DESC, id DESC LIMIT 1) RETURNING message_data`
	schemaPop := rawSchemaPop(q)
	popOne := func(query, sid string) {
		var data string
		if err := pool.QueryRow(ctx, query, sid).Scan(&data); err != nil {
			b.Fatal(err)
		}
	}
	interleave.Run(b, nil, func() {
		_, ok, err := s.PopItem(ctx)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
	}, interleave.Side{Name: "raw", Op: func() { popOne(rawPop, "raw-pop") }},
		interleave.Side{Name: "raw-schema", Op: func() { popOne(schemaPop, "schema-pop") }})
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
	interleave.Run(b, nil, func() {
		got, _, err := s.ItemsSince(ctx, cursor)
		if err != nil || len(got) != 4 {
			b.Fatal(err, len(got))
		}
	}, interleave.Side{Name: "raw", Op: func() {
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
	}})
}

// BenchmarkPopFloor tells apart what a pop costs beyond the raw-schema
// DELETE ... RETURNING (x-raw-schema), by running on the adapter's schema
// what PopItem sends, as raw pgx code scanning into strings:
//
//	locked          popLock (the advisory lock and the session row's
//	                FOR UPDATE, one statement), then the raw-schema DELETE,
//	                one batch: the locks every pop needs to stay
//	                linearizable beside Go and Python writers
//	locked-checked  popLock, then popObject (the DELETE filtered by
//	                PostgreSQL's JSON check): PopItem's statements without
//	                its Go side (decoding, validation, the Item)
//
// x-locked-checked is the library's own client cost; x-locked ÷
// x-locked-checked the check's; x-raw-schema ÷ x-locked the locks'.
func BenchmarkPopFloor(b *testing.B) {
	ctx := context.Background()
	st, _ := benchStore(b)
	pool := st.Pool()
	q := st.q
	s, err := st.Session("floor-lib")
	require.NoError(b, err)
	n := b.N + 2000
	for _, sid := range []string{"floor-lib", "floor-raw", "floor-locked", "floor-checked"} {
		seed(b, st, sid, n)
	}
	schemaPop := rawSchemaPop(q)
	// batch sends the statements, each with the one argument sid, and
	// scans the last one's first column into a string.
	batch := func(sid string, stmts ...string) func() {
		return func() {
			var bt pgx.Batch
			for _, s := range stmts {
				bt.Queue(s, sid)
			}
			br := pool.SendBatch(ctx, &bt)
			for range len(stmts) - 1 {
				if _, err := br.Exec(); err != nil {
					b.Fatal(err)
				}
			}
			var data string
			var id any
			dest := []any{&data}
			if len(stmts) > 1 && stmts[len(stmts)-1] == q.popObject {
				dest = []any{&id, &data, nil}
			}
			if err := br.QueryRow().Scan(dest...); err != nil {
				b.Fatal(err)
			}
			if err := br.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	interleave.Run(b, nil, func() {
		_, ok, err := s.PopItem(ctx)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
	}, interleave.Side{Name: "raw-schema", Op: func() {
		var data string
		if err := pool.QueryRow(ctx, schemaPop, "floor-raw").Scan(&data); err != nil {
			b.Fatal(err)
		}
	}}, interleave.Side{Name: "locked", Op: batch("floor-locked", q.popLock, schemaPop)},
		interleave.Side{Name: "locked-checked", Op: batch("floor-checked", q.popLock, q.popObject)})
}
