package sqlite

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/cursortest"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// FuzzStoredRecord stores arbitrary bytes as a session's message_data,
// once as TEXT (as Python writes) and once as a BLOB (as only a foreign
// writer could), between valid items, and checks the read path: Items,
// LatestItems and PopItem must not panic, must return exactly the valid
// records byte for byte, must report every other one, and PopItem must
// delete none of the others.
func FuzzStoredRecord(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"type":"message","role":"user","content":"hi"}`, ` {"a":1} `,
		``, ` `, `null`, `[]`, `"str"`, `1`, `{`, `{"a":}`, `{"a":1}{"b":2}`,
		"{\"a\":\"\xff\"}", "{\"a\":1}\x00junk", "\x00", `{"dup":1,"dup":2}`,
	} {
		f.Add([]byte(seed))
	}
	ctx := context.Background()
	reports := &driver.CorruptLog{}
	st, err := OpenFile(ctx, ":memory:", Options{OnCorrupt: reports.Handler()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	var seq atomic.Int64
	v0, v1 := session.MustItem(`{"v":0}`), session.MustItem(`{"v":1}`)

	f.Fuzz(func(t *testing.T, data []byte) {
		id := fmt.Sprintf("fuzz-%d", seq.Add(1))
		s, err := st.Session(id)
		if err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(s.AddItems(ctx, []session.Item{v0}))
		must(insertRaw(ctx, st, id, data))
		must(s.AddItems(ctx, []session.Item{v1}))
		_, err = st.DB().ExecContext(ctx, `INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)`, id, data)
		must(err)

		_, verr := session.NewItem(data)
		valid := verr == nil
		want := []string{v0.String(), v1.String()}
		corrupt := 2
		if valid {
			want = []string{v0.String(), string(data), v1.String(), string(data)}
			corrupt = 0
		}

		got, err := s.Items(ctx)
		must(err)
		if g := texts(got); !slices.Equal(g, want) {
			t.Fatalf("Items = %q, want %q", g, want)
		}
		if n := len(reports.Reports(id)); n != corrupt {
			t.Fatalf("Items made %d corrupt reports, want %d", n, corrupt)
		}
		for _, r := range reports.Reports(id) {
			if string(r.Raw) != string(data) {
				t.Fatalf("report carries %q, want the stored %q", r.Raw, data)
			}
		}
		for n := 0; n <= len(want)+1; n++ {
			got, err := s.LatestItems(ctx, n)
			must(err)
			tail := want[max(0, len(want)-n):]
			if g := texts(got); !slices.Equal(g, tail) {
				t.Fatalf("LatestItems(%d) = %q, want %q", n, g, tail)
			}
		}
		for i := len(want) - 1; i >= 0; i-- {
			it, ok, err := s.PopItem(ctx)
			must(err)
			if !ok || it.String() != want[i] {
				t.Fatalf("pop %d = %q, %v; want %q", i, it.String(), ok, want[i])
			}
		}
		_, ok, err := s.PopItem(ctx)
		must(err)
		if ok {
			t.Fatal("no readable item may be left after popping every valid one")
		}
		// Unreadable records are never deleted, by pops above them included.
		var left int
		must(st.DB().QueryRowContext(ctx, `SELECT count(*) FROM agent_messages WHERE session_id = ?`, id).Scan(&left))
		if want := 4 - len(want); left != want {
			t.Fatalf("%d rows left after the pops, want the %d unreadable ones", left, want)
		}
	})
}

// FuzzFollowCursor: a cursor ItemsSince accepts, on either kind of store
// (Python's SQLiteSession tables, AdvancedSQLiteSession's), is one it
// writes for that session (or the zero cursor); any other string is
// session.ErrInvalidCursor.
func FuzzFollowCursor(f *testing.F) {
	const id = "s"
	plain, advanced := followQueries{}, followQueries{advanced: true}
	for _, p := range []position{{}, {x: 3}, {r: 5, rID: 5, x: 5}, {r: 5, rID: 5, x: 9}, {r: 2, rID: 7, x: 4}} {
		f.Add(string(plain.format(id, p)))
		f.Add(string(advanced.format(id, p)))
	}
	for _, tail := range []string{"5:5", "05", "+5", "-5", "5:4", "0:0:0", "1:0:1", "0:1:0", "9223372036854775808"} {
		f.Add(cursorPrefix + sessionTag(id) + ":" + tail)
		f.Add(advancedCursorPrefix + sessionTag(id) + ":" + tail)
	}
	f.Add(cursorPrefix + sessionTag("other") + ":5")
	f.Fuzz(func(t *testing.T, c string) {
		for _, q := range []followQueries{plain, advanced} {
			p, err := q.parse(id, session.Cursor(c))
			cursortest.Parsed(t, c, p, err, func(p position) string { return string(q.format(id, p)) })
		}
	})
}
