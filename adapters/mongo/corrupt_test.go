package mongo

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// reports collects corrupt-record reports.
type reports struct {
	mu   sync.Mutex
	list []driver.CorruptRecord
}

func (r *reports) handler() driver.CorruptHandler {
	return func(_ context.Context, c driver.CorruptRecord) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.list = append(r.list, c)
	}
}

func (r *reports) take() []driver.CorruptRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.list
	r.list = nil
	return out
}

// insertData reserves a seq for id as every writer does and inserts one
// document whose message_data is data (or none, when data is omit).
func insertData(t *testing.T, st *Store, id string, data any) {
	t.Helper()
	ctx := context.Background()
	var sd sessionDoc
	require.NoError(t, st.sessions.FindOneAndUpdate(ctx, bson.D{byID(id)},
		bson.D{{Key: "$inc", Value: bson.D{{Key: fSeq, Value: int64(1)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&sd))
	doc := bson.D{byID(id), {Key: fMsgSeq, Value: sd.Seq}, {Key: fMsgGeneration, Value: sd.Generation}}
	if data != omit {
		doc = append(doc, bson.E{Key: fMessageData, Value: data})
	}
	_, err := st.messages.InsertOne(ctx, doc)
	require.NoError(t, err)
}

var omit = &struct{}{}

// TestCorruptShapes stores every kind of bad record between valid ones: a
// batch element that is not JSON, a JSON array, a non-string element, a
// legacy string that is not an object, and message_data missing, null, a
// number, a document or binary. Reads skip and report each one; latest-N
// counts valid items only; pops remove and report them on the way.
func TestCorruptShapes(t *testing.T) {
	ctx := context.Background()
	var rep reports
	st := newTestStore(t, Options{OnCorrupt: rep.handler()})
	s := mustSession(t, st, "corrupt")
	v := numbered("v", 6)
	add := func(items ...session.Item) { require.NoError(t, s.AddItems(ctx, items)) }

	add(v[0])
	insertData(t, st, "corrupt", bson.A{"not json", v[1].String(), `[1,2]`})
	insertData(t, st, "corrupt", bson.A{int32(7), bson.D{{Key: "a", Value: 1}}, v[2].String()})
	insertData(t, st, "corrupt", `"legacy but a string"`)
	insertData(t, st, "corrupt", v[3].String()) // a valid legacy item
	insertData(t, st, "corrupt", omit)
	insertData(t, st, "corrupt", nil)
	insertData(t, st, "corrupt", int64(42))
	insertData(t, st, "corrupt", bson.D{{Key: "role", Value: "user"}})
	insertData(t, st, "corrupt", bson.Binary{Data: []byte(`{"a":1}`)})
	add(v[4])
	insertData(t, st, "corrupt", bson.A{v[5].String(), "{"})
	const bad = 11

	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(v), texts(got), "corrupt records hide no valid item")
	reps := rep.take()
	require.Len(t, reps, bad, "each corrupt record is reported once per read")
	positions := map[string]bool{}
	for _, r := range reps {
		require.Equal(t, "corrupt", r.SessionID)
		require.True(t, strings.HasPrefix(r.Position, "seq "), r.Position)
		require.Contains(t, r.Position, "_id ")
		require.True(t, errors.Is(r.Err, session.ErrCorruptRecord), "%v", r.Err)
		require.False(t, positions[r.Position], "positions are distinct: %s", r.Position)
		positions[r.Position] = true
	}
	var first bool
	for p := range positions {
		first = first || strings.HasPrefix(p, "seq 2 index 0 (_id ")
	}
	require.True(t, first, "the first bad element is named by seq and index: %v", positions)

	for n := 1; n <= 7; n++ {
		got, err := s.LatestItems(ctx, n)
		require.NoError(t, err)
		require.Equal(t, texts(v[max(0, 6-n):]), texts(got), "latest %d counts valid items only", n)
	}
	rep.take()

	rawOfReports := func(reps []driver.CorruptRecord) []string {
		var out []string
		for _, r := range reps {
			out = append(out, string(r.Raw))
		}
		sort.Strings(out)
		return out
	}
	_, err = s.Items(ctx)
	require.NoError(t, err)
	before := rawOfReports(rep.take())
	for i := 5; i >= 0; i-- {
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, v[i].String(), it.String(), "pop returns the newest valid item")
		require.NotEmpty(t, rep.take(), "the unreadable records above it are reported")
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(v[:i]), texts(got), "and takes nothing else valid")
		rep.take()
	}
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.Len(t, rep.take(), bad, "a pop that finds no readable item reports every unreadable one")
	_, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, before, rawOfReports(rep.take()), "every unreadable record is kept, byte for byte")
}

// TestPopKeepsUnreadableRecordsAbove: an unreadable record above the
// newest readable item, in its own batch or in a newer document, is
// reported and kept byte for byte; the pop takes the item below it.
func TestPopKeepsUnreadableRecordsAbove(t *testing.T) {
	ctx := context.Background()
	var rep reports
	st := newTestStore(t, Options{OnCorrupt: rep.handler()})
	r := rawOf(t, st)
	s := mustSession(t, st, "above")
	v := numbered("v", 4)
	require.NoError(t, s.AddItems(ctx, v[:2]))
	insertData(t, st, "above", bson.A{v[2].String(), "{not json", v[3].String(), `{"a":`})
	insertData(t, st, "above", bson.Binary{Subtype: 0x80, Data: []byte{0xff, 0x00, 'x'}})
	docsBefore := r.messageDocs("above")

	for _, want := range []session.Item{v[3], v[2], v[1], v[0]} {
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want.String(), it.String())
		reps := rep.take()
		require.NotEmpty(t, reps, "the records above are reported")
	}
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	rep.take()

	docsAfter := r.messageDocs("above")
	last := func(docs []bson.M) bson.M { return docs[len(docs)-1] }
	require.Equal(t, last(docsBefore)[fMessageData], last(docsAfter)[fMessageData], "a newer unreadable document is untouched")
	require.Equal(t, bson.A{"{not json", `{"a":`}, docsAfter[len(docsAfter)-2][fMessageData],
		"unreadable elements of the batch stay, in order, byte for byte")
}

func TestBatchSizeLimit(t *testing.T) {
	ctx := context.Background()
	t.Run("size formula is exact", func(t *testing.T) {
		for _, tc := range []struct {
			id    string
			items []session.Item
			ttl   bool
		}{
			{"a", numbered("x", 1), false},
			{strings.Repeat("é", 300), numbered("y", 11), true},
			{"b", append(numbered("z", 120), session.MustItem(`{"big":"`+strings.Repeat("q", 70000)+`"}`)), false},
		} {
			doc := batchDoc{id: bson.NewObjectID(), session: tc.id, seq: 1 << 40, gen: -5, items: tc.items, commit: 2}
			if tc.ttl {
				now := doc.created
				doc.expires = &now
			}
			raw, err := doc.marshal()
			require.NoError(t, err)
			require.Equal(t, len(raw), batchDocSize(tc.id, tc.items, tc.ttl))
		}
	})

	t.Run("an oversized batch writes nothing", func(t *testing.T) {
		items := numbered("big", 40)
		limit := batchDocSize("limit", items, false)
		st := newTestStore(t, Options{MaxBatchBytes: limit})
		s := mustSession(t, st, "limit")
		require.NoError(t, s.AddItems(ctx, items), "a batch exactly at the limit is fine")
		err := s.AddItems(ctx, append(items, numbered("one-more", 1)...))
		require.ErrorIs(t, err, session.ErrBatchTooLarge)
		err = s.ReplaceItems(ctx, append(items, numbered("one-more", 1)...))
		require.ErrorIs(t, err, session.ErrBatchTooLarge)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, 40)
		require.EqualValues(t, 40, rawOf(t, st).session("limit")[fSeq], "no seq was reserved for the refused batch")
	})

	t.Run("the 16 MiB document limit", func(t *testing.T) {
		st := newTestStore(t, Options{})
		s := mustSession(t, st, "huge")
		mib := session.MustItem(`{"c":"` + strings.Repeat("m", 1<<20) + `"}`)
		items := make([]session.Item, 16)
		for i := range items {
			items[i] = mib
		}
		err := s.AddItems(ctx, items)
		require.ErrorIs(t, err, session.ErrBatchTooLarge)
		require.Nil(t, rawOf(t, st).session("huge"), "refused before any round trip")
		require.NoError(t, s.AddItems(ctx, items[:15]), "15 MiB fits")
		got, err := s.LatestItems(ctx, 1)
		require.NoError(t, err)
		require.True(t, got[0].Equal(mib))
	})

	t.Run("options", func(t *testing.T) {
		c := newClient(t, nil)
		for _, o := range []Options{
			{MaxBatchBytes: MaxDocumentBytes + 1},
			{MaxBatchBytes: -1},
			{TTL: -1},
			{SessionsCollection: "x", MessagesCollection: "x"},
		} {
			_, err := New(c, o)
			require.Error(t, err, "%+v", o)
		}
	})
}
