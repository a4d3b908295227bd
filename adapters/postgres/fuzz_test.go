package postgres

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentsessions/sessions/internal/testkit/cursortest"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// FuzzStoredID: every id maps to text PostgreSQL can store, and back.
func FuzzStoredID(f *testing.F) {
	for _, s := range []string{"a", "", "a\x00b", "\xff", escapedPrefix, escapedPrefix + "61", "ünï☃😀", "x' OR '1'='1"} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, id, other string) {
		st := storedID(id)
		if !utf8.ValidString(st) || strings.Contains(st, "\x00") {
			t.Fatalf("storedID(%q) = %q: not storable text", id, st)
		}
		if back := sessionID(st); back != id {
			t.Fatalf("sessionID(storedID(%q)) = %q", id, back)
		}
		if id != other && storedID(other) == st {
			t.Fatalf("%q and %q share the stored id %q", id, other, st)
		}
	})
}

// FuzzSessionID: a session_id read from the table (any writer's) maps to
// an id without panicking, and an id it decodes names that same row.
func FuzzSessionID(f *testing.F) {
	for _, s := range []string{"a", escapedPrefix, escapedPrefix + "6100", escapedPrefix + "zz", escapedPrefix + "61", escapedPrefix + "1b6865783a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stored string) {
		id := sessionID(stored)
		if id != stored && storedID(id) != stored {
			t.Fatalf("sessionID(%q) = %q, whose stored form is %q", stored, id, storedID(id))
		}
	})
}

// FuzzParseID: an id column value in either wire format decodes or errs,
// never panics; int8 and int4 binary values and text digits round-trip.
func FuzzParseID(f *testing.F) {
	f.Add([]byte("42"), int16(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 42}, int16(1))
	f.Add([]byte{0, 0, 0, 42}, int16(1))
	f.Add([]byte{1, 2, 3}, int16(1))
	f.Add([]byte("-9223372036854775808"), int16(0))
	f.Fuzz(func(t *testing.T, b []byte, format int16) {
		id, err := parseID(b, format)
		if err != nil {
			return
		}
		switch {
		case format == 1 && len(b) == 8:
			if uint64(id) != binary.BigEndian.Uint64(b) {
				t.Fatalf("parseID(%x) = %d", b, id)
			}
		case format == 1 && len(b) == 4:
			if id != int64(int32(binary.BigEndian.Uint32(b))) {
				t.Fatalf("parseID(%x) = %d", b, id)
			}
		case format != 1:
			if want, _ := strconv.ParseInt(string(b), 10, 64); want != id {
				t.Fatalf("parseID(%q) = %d", b, id)
			}
		}
	})
}

// FuzzFollowCursor: a cursor ItemsSince accepts is one it writes for the
// session (or the zero cursor); any other string is
// session.ErrInvalidCursor.
func FuzzFollowCursor(f *testing.F) {
	s := &Session{id: "s", sid: "s"}
	at := time.Date(2026, 12, 5, 8, 0, 0, 123456000, time.UTC).Format(cursorTimeLayout)
	later := time.Date(2026, 12, 5, 8, 0, 1, 0, time.UTC).Format(cursorTimeLayout)
	for _, p := range []position{{}, {xID: 2, xAt: at}, {rID: 3, rAt: at, xID: 5, xAt: at}, {rID: 9, rAt: at, xID: 4, xAt: later}} {
		f.Add(string(formatCursor(s.sid, p)))
	}
	for _, tail := range []string{"0,,0,", "03," + at + ",5," + at, "3," + at + ",0,", "3,2026-12-05T08:00:00.1,5," + at, "3," + at + ",2," + at, "-1,,0,"} {
		f.Add(cursorPrefix + sessionTag(s.sid) + ":" + tail)
	}
	f.Fuzz(func(t *testing.T, c string) {
		p, err := s.parseCursor(session.Cursor(c))
		cursortest.Parsed(t, c, p, err, func(p position) string { return string(formatCursor(s.sid, p)) })
	})
}

// FuzzStoredRecord: on any text PostgreSQL holds, objectCheck (the
// server's test that lets a pop delete in one statement) is never true
// where the client's decoder refuses the record; and PopItem on a session
// whose newest row is the record, above a valid item, takes the record
// exactly when the client reads it, and otherwise pops the item below,
// leaving the record where it was.
func FuzzStoredRecord(f *testing.F) {
	for _, rec := range []string{`{"role":"user","content":"hi"}`, ` {"a":1} `, "{\"a\":\n1}", `{}`, `not json`, `[1,2]`, `null`, `{"cut":`,
		`{"a":NaN}`, `{"a":-Infinity}`, `{"a":"\ud800"}`, `{"a":"\u0000"}`, `{"a":1,"a":2}`, `{"a":1e400}`, "{\"a\":\"\t\"}",
		`{"a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, `{"a":"` + strings.Repeat("[", 10001) + `"}`} {
		f.Add(rec)
	}
	ctx := context.Background()
	// Unreadable records are reported to a handler that drops them (the
	// default logs each one).
	st := openStore(f, Options{OnCorrupt: func(context.Context, driver.CorruptRecord) {}})
	below := session.MustItem(`{"role":"user","content":"below"}`)
	check := `SELECT ` + objectCheck + ` FROM (SELECT $1::text AS message_data) AS r`
	var taken bool
	if err := st.Pool().QueryRow(ctx, check, below.String()).Scan(&taken); err != nil || !taken {
		f.Fatalf("objectCheck on %s: %t, %v; the check must take a common item", below, taken, err)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		if !utf8.ValidString(rec) || strings.ContainsRune(rec, 0) {
			return // no PostgreSQL text holds it
		}
		s, err := st.Session("fuzz")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.AddItems(ctx, []session.Item{below}); err != nil {
			t.Fatal(err)
		}
		if err := st.AppendRaw(ctx, s.id, []byte(rec)); err != nil {
			t.Fatal(err)
		}
		want, unreadable := driver.DecodeStoredString(rec)
		var taken bool
		err = st.Pool().QueryRow(ctx, check, rec).Scan(&taken)
		if err == nil && taken && unreadable != nil {
			t.Fatalf("the server's check takes %q, which the client refuses: %v", rec, unreadable)
		}
		if unreadable == nil {
			want = session.MustItem(want.String()) // own its bytes
		} else {
			want = below
		}
		got, ok, err := s.PopItem(ctx)
		if err != nil || !ok || got.String() != want.String() {
			t.Fatalf("PopItem with %q on top = %q, %t, %v; want %q", rec, got.String(), ok, err, want.String())
		}
		left := rawRows(t, st, s.id)
		if unreadable == nil && (len(left) != 1 || left[0] != below.String()) || unreadable != nil && (len(left) != 1 || left[0] != rec) {
			t.Fatalf("PopItem with %q on top left %q", rec, left)
		}
	})
}
