package mongo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
)

// pyReserve is the first statement of the Python SDK's add_items (see
// pyMongo): the $inc of the session's _seq, returning the batch's seq and
// generation. pyInsert is the second, the insert_one of the batch.
func (p *pyMongo) pyReserve(n int) (seq, gen int64) {
	p.t.Helper()
	now := time.Now().UTC()
	var result bson.M
	require.NoError(p.t, p.sessions.FindOneAndUpdate(context.Background(),
		bson.D{{Key: "session_id", Value: p.id}},
		bson.D{
			{Key: "$setOnInsert", Value: bson.D{{Key: "session_id", Value: p.id}, {Key: "created_at", Value: now}, {Key: "_generation", Value: 0}}},
			{Key: "$set", Value: bson.D{{Key: "updated_at", Value: now}}},
			{Key: "$inc", Value: bson.D{{Key: "_seq", Value: n}}},
		},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&result))
	seq, _ = integer(bsonValue(p.t, result["_seq"]))
	gen, _ = integer(bsonValue(p.t, result["_generation"]))
	return seq - 1, gen
}

func (p *pyMongo) pyInsert(seq, gen int64, items []string) {
	p.t.Helper()
	data := bson.A{}
	for _, it := range items {
		data = append(data, it)
	}
	_, err := p.messages.InsertOne(context.Background(), bson.D{
		{Key: "session_id", Value: p.id},
		{Key: "seq", Value: seq},
		{Key: "generation", Value: gen},
		{Key: "message_data", Value: data},
	})
	require.NoError(p.t, err)
}

// followAll reads the whole history through a fresh follower.
func followAll(t *testing.T, s *Session) ([]session.Item, session.Cursor) {
	t.Helper()
	got, cur, err := s.ItemsSince(context.Background(), "")
	require.NoError(t, err)
	return got, cur
}

// TestFollowPythonBelowCursor lands a Python batch below a Go batch a
// follower has read (the Python writer reserved its seq first and inserted
// after the read): the follower must be told its cursor is lost, and a
// fresh read must hold the batch.
func TestFollowPythonBelowCursor(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "follow-py-below")
	py := newPyMongo(t, st, "follow-py-below")
	a, b := numbered("a", 2), numbered("b", 2)
	require.NoError(t, s.AddItems(ctx, a))
	seq, gen := py.pyReserve(1)
	require.NoError(t, s.AddItems(ctx, b))
	got, cur := followAll(t, s)
	require.Equal(t, texts(append(append([]session.Item{}, a...), b...)), texts(got))

	py.pyInsert(seq, gen, []string{`{"role":"user","content":"p"}`})
	got, next, err := s.ItemsSince(ctx, cur)
	require.ErrorIs(t, err, session.ErrCursorLost, "a batch landed below the cursor (got %v)", texts(got))
	require.Empty(t, got)
	require.Equal(t, cur, next)

	all, err := s.Items(ctx)
	require.NoError(t, err)
	got, _ = followAll(t, s)
	require.Equal(t, texts(all), texts(got))
	require.Len(t, got, 5)
}

// TestFollowGoBelowPythonCursor commits a Go batch below a Python batch a
// follower has read: the Go append reserved its seq first, and the
// Python batch, visible at its insert, was read before the commit. With
// AddItemsOnce, the read also sees the Go batch inserted and not yet
// committed, which it must not count.
func TestFollowGoBelowPythonCursor(t *testing.T) {
	ctx := context.Background()
	for _, once := range []bool{false, true} {
		id := "follow-go-below"
		if once {
			id += "-once"
		}
		st := newTestStore(t, Options{})
		s := mustSession(t, st, id)
		py := newPyMongo(t, st, id)
		require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
		var cur session.Cursor
		read := func() {
			require.NoError(t, py.addItems([]string{`{"role":"user","content":"p"}`}))
			var got []session.Item
			got, cur = followAll(t, s)
			require.Len(t, got, 2, "once=%v", once)
			got, same, err := s.ItemsSince(ctx, cur)
			require.NoError(t, err, "once=%v: nothing changed yet", once)
			require.Empty(t, got)
			require.Equal(t, cur, same)
		}
		if once {
			testHookBeforeOnceCommit = func(*Session) {
				testHookBeforeOnceCommit = nil
				read()
			}
			ok, err := s.AddItemsOnce(ctx, "op", numbered("b", 1))
			testHookBeforeOnceCommit = nil
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			testHookAfterReserve = func(*Session, int64) {
				testHookAfterReserve = nil
				read()
			}
			require.NoError(t, s.AddItems(ctx, numbered("b", 1)))
			testHookAfterReserve = nil
		}
		got, _, err := s.ItemsSince(ctx, cur)
		require.ErrorIs(t, err, session.ErrCursorLost, "once=%v: a batch was committed below the cursor (got %v)", once, texts(got))
		got, _ = followAll(t, s)
		require.Len(t, got, 3)
	}
}

// TestFollowPopsDoNotLoseCursor pops above the cursor, with Python's pop
// (which deletes the empty documents below the cursor first) and this
// package's: the follower keeps its cursor.
func TestFollowPopsDoNotLoseCursor(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "follow-pops")
	py := newPyMongo(t, st, "follow-pops")
	require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
	require.NoError(t, s.AddItems(ctx, numbered("b", 1)))
	_, ok, err := s.PopItem(ctx) // b's document stays, empty
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, py.addItems([]string{`{"role":"user","content":"c"}`}))
	got, cur := followAll(t, s)
	require.Len(t, got, 2)

	for _, pop := range []func(){
		func() {
			_, ok, err := py.popItem()
			require.NoError(t, err)
			require.True(t, ok)
		},
		func() {
			_, ok, err := s.PopItem(ctx)
			require.NoError(t, err)
			require.True(t, ok)
		},
	} {
		require.NoError(t, s.AddItems(ctx, numbered("d", 2)))
		pop()
		got, next, err := s.ItemsSince(ctx, cur)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("d", 1)), texts(got))
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		got, same, err := s.ItemsSince(ctx, cur)
		require.NoError(t, err, "the pop took only what followed the cursor")
		require.Empty(t, got)
		require.Equal(t, cur, same)
		_, _, err = s.ItemsSince(ctx, next)
		require.ErrorIs(t, err, session.ErrCursorLost)
	}
}

// TestFollowOldCursor reports a cursor of the previous format, which
// cannot tell whether a batch landed below it, as lost.
func TestFollowOldCursor(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "follow-old")
	require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
	_, cur := followAll(t, s)
	c, _, err := parseFollowCursor("follow-old", cur)
	require.NoError(t, err)
	old := "m1:" + followTag("follow-old") + ":" + strings.Join([]string{
		"0", c.r.String() + ",2", c.x.String()}, ":")
	_, _, err = s.ItemsSince(ctx, session.Cursor(old))
	require.ErrorIs(t, err, session.ErrCursorLost)
	_, _, err = s.ItemsSince(ctx, session.Cursor("m1:"+followTag("other")+":0::"))
	require.ErrorIs(t, err, session.ErrInvalidCursor)
}

// TestFollowCountsWhatItReads follows a history holding documents of
// every shape (unreadable records, markers, legacy strings, a missing
// message_data): a follower that read them keeps its cursor while nothing
// changes, and gets what follows.
func TestFollowCountsWhatItReads(t *testing.T) {
	ctx := context.Background()
	var rep reports
	st := newTestStore(t, Options{OnCorrupt: rep.handler()})
	s := mustSession(t, st, "follow-shapes")
	require.NoError(t, s.AddItems(ctx, numbered("a", 1)))
	for _, data := range []any{bson.A{int32(1)}, bson.A{}, `{"role":"user","content":"l"}`, "not json",
		omit, nil, int32(7), bson.D{{Key: "0", Value: "x"}}, bson.A{"not json", `{"role":"user","content":"m"}`}} {
		insertData(t, st, "follow-shapes", data)
		_, cur := followAll(t, s)
		got, same, err := s.ItemsSince(ctx, cur)
		require.NoError(t, err, "after %v", data)
		require.Empty(t, got)
		require.Equal(t, cur, same)
		b := numbered("b", 1)
		require.NoError(t, s.AddItems(ctx, b))
		got, _, err = s.ItemsSince(ctx, cur)
		require.NoError(t, err, "after %v", data)
		require.Equal(t, texts(b), texts(got))
	}
}

// TestFollowCountsUnderExpiry follows a session whose stamped documents an
// expiry hides beside Python's unstamped ones, then after its restart: the
// count sees what the read shows, so the cursor holds while nothing
// changes.
func TestFollowCountsUnderExpiry(t *testing.T) {
	ctx := context.Background()
	const ttl = time.Hour
	clock := newFakeClock()
	st := newTestStore(t, Options{TTL: ttl, Now: clock.Now})
	s := mustSession(t, st, "follow-expiry")
	py := newPyMongo(t, st, "follow-expiry")
	require.NoError(t, s.AddItems(ctx, numbered("g", 2)))
	require.NoError(t, py.addItems([]string{`{"py":"before"}`}))
	_, stale := followAll(t, s)
	clock.Advance(ttl + time.Second)
	_, _, err := s.ItemsSince(ctx, stale)
	require.ErrorIs(t, err, session.ErrCursorLost, "the expiry hid items the reader was given")

	step := func(what string, write func(), want []string) {
		t.Helper()
		_, cur := followAll(t, s)
		got, same, err := s.ItemsSince(ctx, cur)
		require.NoError(t, err, what)
		require.Empty(t, got, what)
		require.Equal(t, cur, same, what)
		write()
		got, _, err = s.ItemsSince(ctx, cur)
		require.NoError(t, err, what)
		require.Equal(t, want, texts(got), what)
	}
	step("expired", func() { require.NoError(t, py.addItems([]string{`{"py":"after"}`})) }, []string{`{"py":"after"}`})
	require.NoError(t, s.AddItems(ctx, numbered("n", 1)))
	through, ok := rawOf(t, st).session("follow-expiry")[fExpiredThrough].(bson.DateTime)
	require.True(t, ok, "the write restarted the session")
	// A document the restart hid and its deletion missed, below the cursor.
	var sd sessionDoc
	require.NoError(t, st.sessions.FindOneAndUpdate(ctx, bson.D{byID("follow-expiry")},
		bson.D{{Key: "$inc", Value: bson.D{{Key: fSeq, Value: int64(1)}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&sd))
	_, err = st.messages.InsertOne(ctx, bson.D{byID("follow-expiry"), {Key: fMsgSeq, Value: sd.Seq - 1},
		{Key: fMsgGeneration, Value: sd.Generation}, {Key: fMessageData, Value: bson.A{`{"hidden":1}`}},
		{Key: fExpiresAt, Value: through}})
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, numbered("o", 1)))
	step("restarted", func() { require.NoError(t, py.addItems([]string{`{"py":"last"}`})) }, []string{`{"py":"last"}`})
}
