package legacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// FuzzJSONCodecRaw: bytes a foreign session hands over as a
// json.RawMessage either become an Item holding exactly those bytes, or
// are refused with ErrInvalidItem; an accepted item decodes back to the
// same bytes.
func FuzzJSONCodecRaw(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":1} `, `{"<":"&"}`, `[1]`, `"s"`, `garbage`, ``, `{"a":}`, "{\"a\":\"\xff\"}", `{"a":1}{"b":2}`} {
		f.Add([]byte(s))
	}
	c := legacy.JSONCodec[json.RawMessage]{}
	f.Fuzz(func(t *testing.T, b []byte) {
		it, err := c.Encode(json.RawMessage(b))
		if err != nil {
			if !errors.Is(err, session.ErrInvalidItem) {
				t.Fatalf("refusal must wrap ErrInvalidItem: %v", err)
			}
			if _, perr := session.NewItem(b); perr == nil {
				t.Fatalf("refused %q, which NewItem accepts", b)
			}
			return
		}
		if !bytes.Equal(it.Bytes(), b) {
			t.Fatalf("bytes changed: %q -> %q", b, it.Bytes())
		}
		back, err := c.Decode(it)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("decode: %q, %v", back, err)
		}
	})
}

// FuzzFromLimitSession: whatever records a foreign session holds
// (separated by NUL in the input), the shim returns exactly the records
// that are JSON objects, in order; LatestItems(n) is the newest n of
// them; every other record is reported; a pop returns the newest valid
// record.
func FuzzFromLimitSession(f *testing.F) {
	f.Add([]byte("{\"a\":1}\x00garbage\x00{\"b\":2}"), uint8(1))
	f.Add([]byte("[1]\x00\"s\"\x00{}"), uint8(3))
	f.Add([]byte("{\"a\":1}"), uint8(0))
	f.Add([]byte("x\x00y\x00z\x00{\"z\":0}\x00w"), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		ctx := context.Background()
		st := newLimitStore()
		var want []string
		bad := 0
		for _, rec := range bytes.Split(data, []byte{0}) {
			st.appendRaw("s", rec)
			if _, err := session.NewItem(rec); err == nil {
				want = append(want, string(rec))
			} else {
				bad++
			}
		}
		reports := 0
		s := legacy.FromLimitSessionWith[json.RawMessage](st.session("s"), legacy.LimitOptions[json.RawMessage]{
			OnCorrupt: func(context.Context, driver.CorruptRecord) { reports++ },
		})
		all, err := s.Items(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := texts(all); !equalStrings(got, want) {
			t.Fatalf("Items = %q, want %q", got, want)
		}
		if reports != bad {
			t.Fatalf("%d corrupt records, %d reports", bad, reports)
		}
		latest, err := s.(session.LatestReader).LatestItems(ctx, int(n))
		if err != nil {
			t.Fatal(err)
		}
		if got, w := texts(latest), texts(all[len(all)-min(int(n), len(all)):]); !equalStrings(got, w) {
			t.Fatalf("LatestItems(%d) = %q, want %q", n, got, w)
		}
		recs := bytes.Split(data, []byte{0})
		_, topBad := session.NewItem(recs[len(recs)-1])
		it, ok, err := s.PopItem(ctx)
		switch {
		case topBad != nil:
			// The shape pops only the newest: an unreadable one is kept.
			if !errors.Is(err, session.ErrCorruptRecord) || ok {
				t.Fatalf("PopItem over an unreadable newest record = %q, %v, %v; want ErrCorruptRecord", it.String(), ok, err)
			}
			if n := len(st.data["s"]); n != len(recs) {
				t.Fatalf("PopItem removed a record: %d of %d left", n, len(recs))
			}
		case err != nil || ok != (len(want) > 0) || (ok && it.String() != want[len(want)-1]):
			t.Fatalf("PopItem = %q, %v, %v; want the newest of %q", it.String(), ok, err, want)
		}
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
