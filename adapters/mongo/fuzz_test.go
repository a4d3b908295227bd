package mongo

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/agentsessions/sessions/internal/testkit/cursortest"
	"github.com/agentsessions/sessions/session"
)

// messageDocWith builds a message document whose message_data element has
// BSON type typ and value bytes value, taken as they are.
func messageDocWith(typ byte, value []byte) bson.Raw {
	elem := append([]byte{typ}, fMessageData+"\x00"...)
	elem = append(elem, value...)
	return bson.Raw(bsoncore.BuildDocument(nil,
		bsoncore.AppendObjectIDElement(nil, "_id", bson.NewObjectID()),
		bsoncore.AppendStringElement(nil, fSessionID, "fuzz"),
		bsoncore.AppendInt64Element(nil, fMsgSeq, 7),
		bsoncore.AppendInt64Element(nil, fMsgGeneration, 0),
		elem,
	))
}

// FuzzDecodeMessageData decodes message documents whose message_data is
// any BSON value at all. Decoding must never panic; invalid BSON is an
// error; otherwise every record is either an item holding a JSON object or
// a corrupt-record report naming the session and a position, and a batch
// holds one record per array element.
func FuzzDecodeMessageData(f *testing.F) {
	for _, v := range []any{
		bson.A{`{"type":"message","role":"user","content":"hi"}`, `{"a":[1,{"b":null}]}`},
		bson.A{},
		bson.A{"not json", `[1,2]`, `"s"`, `{"unterminated":`, "{\"bad\":\"\xff\"}"},
		bson.A{int32(1), bson.D{{Key: "a", Value: 1}}, nil, bson.A{"{}"}, true},
		`{"legacy":"item"}`,
		`not an object`,
		int64(42),
		bson.Null{},
		bson.D{{Key: "role", Value: "user"}},
		bson.Binary{Data: []byte(`{"a":1}`)},
		bson.A{strings.Repeat("{", 300)},
	} {
		typ, val, err := bson.MarshalValue(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(typ), val)
	}
	f.Add(byte(bson.TypeString), []byte{0xff, 0xff, 0xff, 0x7f, 'x', 0})
	f.Add(byte(bson.TypeArray), []byte{5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, typ byte, value []byte) {
		raw := messageDocWith(typ, value)
		items, bad, err := decodeAll(raw, "fuzz")
		if err != nil {
			if !errors.Is(err, errNotDocument) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		d, err := parseMessageDoc(raw)
		if err != nil {
			t.Fatalf("decodeAll accepted what parseMessageDoc refuses: %v", err)
		}
		if got, want := len(items)+len(bad), d.records(); got != want {
			t.Fatalf("%d items and %d reports for %d records", len(items), len(bad), want)
		}
		for _, it := range items {
			if _, err := session.NewItem(it.Bytes()); err != nil {
				t.Fatalf("decoded an item that is not a JSON object: %q", it.Bytes())
			}
		}
		for _, c := range bad {
			if c.SessionID != "fuzz" || !strings.HasPrefix(c.Position, "seq 7") || !errors.Is(c.Err, session.ErrCorruptRecord) {
				t.Fatalf("bad report: %+v", c)
			}
		}
	})
}

// FuzzParseMessageDocument feeds whole documents, valid or not.
func FuzzParseMessageDocument(f *testing.F) {
	f.Add([]byte(messageDocWith(byte(bson.TypeString), []byte{3, 0, 0, 0, '{', '}', 0})))
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Add([]byte{})
	for _, exp := range []any{bson.DateTime(1_700_000_000_000), "not a date", int64(7)} {
		d, err := bson.Marshal(bson.D{{Key: "seq", Value: int64(3)}, {Key: "message_data", Value: bson.A{`{"x":NaN}`}}, {Key: "expires_at", Value: exp}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		items, bad, err := decodeAll(bson.Raw(doc), "fuzz")
		if err != nil {
			return
		}
		if d, err := parseMessageDoc(bson.Raw(doc)); err == nil && d.stamped {
			if v, err := bson.Raw(doc).LookupErr("expires_at"); err != nil || v.Type != bson.TypeDateTime {
				t.Fatal("stamped without a date expires_at")
			}
		}
		for _, it := range items {
			if !it.Valid() {
				t.Fatal("invalid item")
			}
		}
		_ = bad
	})
}

// FuzzFollowCursor: a cursor ItemsSince accepts is one it writes for the
// session (or the zero cursor); a cursor of the previous format naming
// the session is session.ErrCursorLost, and any other string
// session.ErrInvalidCursor.
func FuzzFollowCursor(f *testing.F) {
	const sid = "s"
	id := append([]byte{byte(bson.TypeInt64)}, 7, 0, 0, 0, 0, 0, 0, 0)
	at := docPos{ok: true, seq: 4, id: id}
	for _, c := range []followCursor{{}, {gen: 1, x: at, k: 1}, {gen: 2, r: at, rLen: 3, x: at, k: 5}} {
		f.Add(string(c.format(sid)))
	}
	tag := followPrefix + followTag(sid) + ":"
	for _, tail := range []string{"0:::0", "00:::0", "0:4,12:4,12:1", "0:4,1207000000000000,0:4,1207000000000000:1", "0:4,1207000000000000,1:4,1207000000000000:-1"} {
		f.Add(tag + tail)
	}
	f.Add(oldFollowPrefix + followTag(sid) + ":0::")
	f.Fuzz(func(t *testing.T, c string) {
		got, _, err := parseFollowCursor(sid, session.Cursor(c))
		cursortest.Parsed(t, c, got, err, func(p followCursor) string { return string(p.format(sid)) }, session.ErrCursorLost)
	})
}
