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

// TestFollowTransitionBetweenReads places a clear, its marker and half of
// its collection exactly between ItemsSince's two reads: the follower must
// report its cursor lost (the read stands after the clear), not return
// what the collection left.
func TestFollowTransitionBetweenReads(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	s := mustSession(t, st, "follow-clear")
	require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
	_, cur, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	for b := range 3 {
		require.NoError(t, s.AddItems(ctx, numbered(string(rune('b'+b)), 2)))
	}
	setBetweenReads(false, func() {
		var sd sessionDoc
		require.NoError(t, st.sessions.FindOneAndUpdate(ctx, bson.D{byID("follow-clear")},
			bson.D{{Key: "$inc", Value: bson.D{{Key: fGeneration, Value: int64(1)}, {Key: fSeq, Value: int64(1)}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&sd))
		require.NoError(t, s.insertBatch(ctx, &sd, sd.Generation, nil, time.Now()))
		docs := r.messageDocs("follow-clear")
		for _, d := range docs[len(docs)-3 : len(docs)-1] {
			_, err := st.messages.DeleteOne(ctx, bson.D{{Key: "_id", Value: d["_id"]}})
			require.NoError(t, err)
		}
	})
	got, _, err := s.ItemsSince(ctx, cur)
	require.ErrorIs(t, err, session.ErrCursorLost, "the clear between the reads")
	require.Empty(t, got)
	got, c0, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, session.Cursor(""), c0)
}

// TestFollowCorruptRecords follows a history holding unreadable records
// after the last readable one: each is reported once, what follows them
// is read, and a pop of the item below them loses the cursor.
func TestFollowCorruptRecords(t *testing.T) {
	ctx := context.Background()
	var rep reports
	st := newTestStore(t, Options{OnCorrupt: rep.handler()})
	s := mustSession(t, st, "follow-corrupt")
	a := numbered("a", 2)
	require.NoError(t, s.AddItems(ctx, a))
	insertData(t, st, "follow-corrupt", bson.A{"not json"})
	got, c1, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	require.Equal(t, texts(a), texts(got))
	require.Len(t, rep.take(), 1, "the unreadable record is reported")

	got, c2, err := s.ItemsSince(ctx, c1)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, c1, c2, "nothing new")
	require.Empty(t, rep.take(), "reported once")

	insertData(t, st, "follow-corrupt", "{also not json")
	got, c3, err := s.ItemsSince(ctx, c2)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NotEqual(t, c2, c3, "the cursor moves past the new unreadable document")
	require.Len(t, rep.take(), 1)

	b := numbered("b", 1)
	require.NoError(t, s.AddItems(ctx, b))
	got, c4, err := s.ItemsSince(ctx, c3)
	require.NoError(t, err)
	require.Equal(t, texts(b), texts(got))
	require.Empty(t, rep.take(), "the unreadable records read past are not reported again")

	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, texts(b), texts([]session.Item{it}))
	rep.take()
	got, c5, err := s.ItemsSince(ctx, c3)
	require.NoError(t, err, "the pop took an item after the cursor")
	require.Empty(t, got)
	require.Equal(t, c3, c5)
	_, _, err = s.ItemsSince(ctx, c4)
	require.ErrorIs(t, err, session.ErrCursorLost, "the pop took the last item read")

	// Pops skip the unreadable records and take a[1] from below them.
	it, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, texts(a[1:]), texts([]session.Item{it}))
	_, _, err = s.ItemsSince(ctx, c3)
	require.ErrorIs(t, err, session.ErrCursorLost, "a pop below unreadable records the cursor read past")
}

// TestFollowCursorsAreCanonical refuses every cursor ItemsSince did not
// make: altered fields, another session's, trailing bytes.
func TestFollowCursorsAreCanonical(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "canon")
	require.NoError(t, s.AddItems(ctx, numbered("a", 2)))
	_, c, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	parsed, zero, err := parseFollowCursor("canon", c)
	require.NoError(t, err)
	require.False(t, zero)
	require.True(t, parsed.r.ok)
	require.Equal(t, 2, parsed.rLen)
	for _, bad := range []session.Cursor{c + " ", c + ":", "x" + c, session.Cursor(string(c[:len(c)-1])),
		session.Cursor(followPrefix + followTag("other") + string(c[len(followPrefix)+8:]))} {
		_, _, err := s.ItemsSince(ctx, bad)
		require.ErrorIs(t, err, session.ErrInvalidCursor, "%q", bad)
	}
}

// TestAppendOnceMovesIDs checks where operation ids live: the last one in
// the session document, the earlier ones moved to the operations
// collection by the next AddItemsOnce; both kinds stay recorded across a
// clear, and RemoveSession deletes them.
func TestAppendOnceMovesIDs(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "once-moves")
	var want []session.Item
	for i := range 5 {
		b := numbered(string(rune('a'+i)), 2)
		ok, err := s.AddItemsOnce(ctx, string(rune('a'+i)), b)
		require.NoError(t, err)
		require.True(t, ok)
		want = append(want, b...)
		require.Len(t, opsIn(t, st, "once-moves"), 1, "after op %d, only the newest id is in the session document", i)
		require.Equal(t, i, movedIDs(t, st, "once-moves"), "the earlier ids are moved")
	}
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(want), texts(got))
	require.NoError(t, s.Clear(ctx))
	for i := range 5 {
		ok, err := s.AddItemsOnce(ctx, string(rune('a'+i)), numbered("x", 1))
		require.NoError(t, err)
		require.False(t, ok, "op %d after a clear", i)
	}
	require.NoError(t, st.RemoveSession(ctx, "once-moves"))
	n, err := st.operations.CountDocuments(ctx, bson.D{byID("once-moves")})
	require.NoError(t, err)
	require.Zero(t, n)
	ok, err := s.AddItemsOnce(ctx, "a", numbered("y", 1))
	require.NoError(t, err)
	require.True(t, ok, "a removed session's ids are gone")
}

// TestAppendOnceRacesBeforeCommit records the same id, and moves it,
// between an AddItemsOnce's look-up and its commit, from another Store:
// the commit must not apply, and the call must report the id used. The
// peer finds the id claimed by the call it interrupts, and waits until
// that call's reservation is 2 seconds old to take the claim over (see
// "Claims" in once.go): each case takes those 2 seconds.
func TestAppendOnceRacesBeforeCommit(t *testing.T) {
	ctx := context.Background()
	db := uniqueDB(t)
	st := newTestStore(t, Options{Database: db})
	peer := newTestStore(t, Options{Database: db})
	for _, move := range []bool{false, true} {
		id := "once-race-moved"
		if !move {
			id = "once-race"
		}
		s, p := mustSession(t, st, id), mustSession(t, peer, id)
		testHookBeforeOnceCommit = func(*Session) {
			testHookBeforeOnceCommit = nil
			ok, err := p.AddItemsOnce(ctx, "op", nil)
			require.NoError(t, err)
			require.True(t, ok, "the peer records the id first")
			if move {
				ok, err := p.AddItemsOnce(ctx, "other", nil)
				require.NoError(t, err)
				require.True(t, ok)
				require.NotContains(t, opsIn(t, st, id), "op", "the peer moved the id out of the session document")
			}
		}
		ok, err := s.AddItemsOnce(ctx, "op", numbered("a", 2))
		testHookBeforeOnceCommit = nil
		require.NoError(t, err)
		require.False(t, ok, "move=%v: the id was recorded before the commit", move)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, got, "move=%v: nothing appended", move)
		sd := rawOf(t, st).session(id)
		require.Empty(t, sd[fResv], "no reservation left behind")
	}
}

// movedIDs counts the operation documents of session id in the
// operations collection, not its claims and decisions (see "Claims" in
// once.go).
func movedIDs(t *testing.T, st *Store, id string) int {
	t.Helper()
	cur, err := st.operations.Find(context.Background(), bson.D{byID(id)})
	require.NoError(t, err)
	var docs []struct {
		ID string `bson:"_id"`
	}
	require.NoError(t, cur.All(context.Background(), &docs))
	n := 0
	for _, d := range docs {
		if !strings.HasPrefix(d.ID, "claim:") && !strings.HasPrefix(d.ID, "decided:") {
			n++
		}
	}
	return n
}

// opsIn returns the operation ids session id's document holds in _ops.
func opsIn(t *testing.T, st *Store, id string) []string {
	t.Helper()
	raw, err := st.sessions.FindOne(context.Background(), bson.D{byID(id)}).Raw()
	require.NoError(t, err)
	v, err := raw.LookupErr(fOps)
	if err != nil {
		return nil
	}
	elems, err := v.Document().Elements()
	require.NoError(t, err)
	var out []string
	for _, e := range elems {
		out = append(out, e.Value().StringValue())
	}
	return out
}

// TestFollowOnceRoundTrips counts the commands of ItemsSince and
// AddItemsOnce once the Store is warm.
func TestFollowOnceRoundTrips(t *testing.T) {
	ctx := context.Background()
	st, log := loggedStore(t)
	s := mustSession(t, st, "rt")
	ok, err := s.AddItemsOnce(ctx, "warm", numbered("w", 2))
	require.NoError(t, err)
	require.True(t, ok)
	_, cur, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)

	const (
		reserve   = "findAndModify agent_sessions"
		insert    = "insert agent_messages"
		readSess  = "find agent_sessions"
		readMsgs  = "find agent_messages"
		countMsgs = "aggregate agent_messages"
		updSess   = "update agent_sessions"
		lookUp    = "find agent_operations"
		move      = "insert agent_operations"
		claim     = "insert agent_operations"
		decide    = "insert agent_operations"
	)
	for _, tc := range []struct {
		name string
		op   func(t *testing.T)
		want []string
	}{
		{"follow, nothing new", func(t *testing.T) {
			got, next, err := s.ItemsSince(ctx, cur)
			require.NoError(t, err)
			require.Empty(t, got)
			require.Equal(t, cur, next)
		}, []string{readSess, readMsgs, countMsgs}},
		{"follow after an append", func(t *testing.T) {
			require.NoError(t, s.AddItems(ctx, numbered("a", 3)))
			log.take()
			got, next, err := s.ItemsSince(ctx, cur)
			require.NoError(t, err)
			require.Equal(t, texts(numbered("a", 3)), texts(got))
			cur = next
		}, []string{readSess, readMsgs, countMsgs}},
		{"append once, moving the previous id", func(t *testing.T) {
			ok, err := s.AddItemsOnce(ctx, "op-1", numbered("b", 2))
			require.NoError(t, err)
			require.True(t, ok)
		}, []string{reserve, insert, lookUp, move, claim, updSess, decide}},
		{"append once, an id in the session document", func(t *testing.T) {
			ok, err := s.AddItemsOnce(ctx, "op-1", numbered("b", 2))
			require.NoError(t, err)
			require.False(t, ok)
		}, []string{reserve, updSess}},
		{"append once, a moved id", func(t *testing.T) {
			ok, err := s.AddItemsOnce(ctx, "warm", numbered("b", 2))
			require.NoError(t, err)
			require.False(t, ok)
		}, []string{reserve, insert, lookUp, move, claim, "delete agent_messages", updSess}},
		{"record an empty batch's id", func(t *testing.T) {
			ok, err := s.AddItemsOnce(ctx, "op-empty", nil)
			require.NoError(t, err)
			require.True(t, ok)
		}, []string{reserve, lookUp, move, claim, updSess, decide}},
		{"append once to a new session", func(t *testing.T) {
			ok, err := mustSession(t, st, "rt-new").AddItemsOnce(ctx, "op", numbered("n", 1))
			require.NoError(t, err)
			require.True(t, ok)
		}, []string{reserve, insert, lookUp, claim, updSess, decide}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.take()
			tc.op(t)
			require.ElementsMatch(t, tc.want, log.take())
		})
	}
}
