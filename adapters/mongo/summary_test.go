package mongo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// TestSummarizeSessionsAgreesWithReads summarizes sessions of every shape
// a read meets (unreadable records of each kind, a cleared generation
// left behind, a batch reserved and not committed, a pop committed and
// not applied, documents without a session document, checkpoints) and
// requires each summary to say what Items, the corrupt-record handler,
// the session document and the checkpoint calls say.
func TestSummarizeSessionsAgreesWithReads(t *testing.T) {
	ctx := context.Background()
	var rep reports
	st := newTestStore(t, Options{OnCorrupt: rep.handler()})
	db := st.client.Database(st.opts.Database)
	var ids []string
	open := func(id string) *Session {
		ids = append(ids, id)
		return mustSession(t, st, id)
	}

	for shape := range 3 {
		id := fmt.Sprintf("raw-%d", shape)
		s := open(id)
		require.NoError(t, s.AddItems(ctx, numbered("before", 2)))
		require.NoError(t, appendRawShape(ctx, db, id, []byte(`{"not json`), shape))
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"after":"ü"}`)}))
	}
	insertData(t, st, "raw-0", omit)
	insertData(t, st, "raw-1", bson.A{int32(7), `{"ok":1}`, `[1]`})

	s := open("cleared")
	require.NoError(t, s.AddItems(ctx, numbered("old", 3)))
	require.NoError(t, s.Clear(ctx))
	require.NoError(t, s.AddItems(ctx, numbered("new", 2)))
	// an old-generation document the collection missed
	_, err := st.messages.InsertOne(ctx, bson.D{byID("cleared"), {Key: fMsgSeq, Value: int64(1)}, {Key: fMsgGeneration, Value: int64(0)},
		{Key: fMessageData, Value: bson.A{`{"dead":1}`}}})
	require.NoError(t, err)

	s = open("uncommitted")
	require.NoError(t, s.AddItems(ctx, numbered("u", 2)))
	sd, now, err := s.reserveAs(ctx, 2, bson.NewObjectID())
	require.NoError(t, err)
	doc := batchDoc{id: bson.NewObjectID(), session: "uncommitted", seq: sd.batchSeq(), gen: sd.Generation,
		items: numbered("hidden", 2), created: now, commit: 1}
	raw, err := doc.marshal()
	require.NoError(t, err)
	_, err = st.messages.InsertOne(ctx, raw)
	require.NoError(t, err)

	s = open("popping")
	require.NoError(t, s.AddItems(ctx, numbered("p", 3)))
	sd, err = s.loadSession(ctx)
	require.NoError(t, err)
	docs, err := s.loadNonEmpty(ctx, &sd.Generation, popWindow)
	require.NoError(t, err)
	d, j, _ := newestReadable(view(docs, sd), sd, time.Now(), "popping")
	require.NotNil(t, d)
	ok, err := s.commitPop(ctx, sd, d, j)
	require.NoError(t, err)
	require.True(t, ok, "a pop committed, not applied")

	_, err = st.messages.InsertOne(ctx, bson.D{byID("no-session-doc"), {Key: fMsgSeq, Value: int64(0)},
		{Key: fMessageData, Value: bson.A{`{"orphan":1}`}}})
	require.NoError(t, err)
	ids = append(ids, "no-session-doc")

	s = open("checkpoints")
	require.NoError(t, s.AddItems(ctx, numbered("c", 1)))
	for _, name := range []string{"b", "a"} {
		_, err := s.SaveCheckpoint(ctx, name, []byte(`{"v":"`+name+`"}`), 0)
		require.NoError(t, err)
	}
	_, err = s.SaveCheckpoint(ctx, "gone", []byte(`{}`), 0)
	require.NoError(t, err)
	require.NoError(t, s.DeleteCheckpoint(ctx, "gone", 1))
	ids = append(ids, "nothing", "raw-1") // a session with nothing, and a repeat

	rep.take()
	seen := map[string]int{}
	sums, err := st.SummarizeSessions(ctx, ids, func(id string, it session.Item) { seen[id]++ })
	require.NoError(t, err)
	require.Empty(t, rep.take(), "a summary counts unreadable records, it does not report them")
	require.Len(t, sums, len(ids))
	nonEmpty := 0
	for i, id := range ids {
		sum := sums[i]
		require.Equal(t, id, sum.ID)
		h := mustSession(t, st, id)
		items, err := h.Items(ctx)
		require.NoError(t, err)
		var size int64
		for _, it := range items {
			size += int64(len(it.Bytes()))
		}
		require.Equal(t, len(items), sum.Items, "%s: items", id)
		require.Equal(t, size, sum.Bytes, "%s: bytes", id)
		require.Equal(t, len(rep.take()), sum.Unreadable, "%s: unreadable", id)
		if id != "raw-1" {
			require.Equal(t, sum.Items, seen[id], "%s: each saw every item", id)
		}
		var m struct {
			Updated time.Time `bson:"updated_at"`
		}
		err = st.sessions.FindOne(ctx, bson.D{byID(id)}).Decode(&m)
		require.Equal(t, err == nil, !sum.Updated.IsZero(), "%s: updated", id)
		require.True(t, m.Updated.Equal(sum.Updated), "%s: updated", id)
		names, err := h.ListCheckpoints(ctx)
		require.NoError(t, err)
		require.Len(t, sum.Checkpoints, len(names), id)
		for j, n := range names {
			doc, v, err := h.LoadCheckpoint(ctx, n)
			require.NoError(t, err)
			require.Equal(t, adapters.StoredCheckpoint{Name: n, Version: v, Document: doc}, sum.Checkpoints[j])
		}
		if sum.Items > 0 {
			nonEmpty++
		}
	}
	byID := map[string]adapters.SessionSummary{}
	for _, s := range sums {
		byID[s.ID] = s
	}
	// The shapes the comparison rests on are there.
	require.Equal(t, 2, byID["raw-0"].Unreadable, "the raw record and a document without message_data")
	require.Equal(t, 3, byID["raw-1"].Unreadable, "the raw record, a number and an array")
	require.Equal(t, 2, byID["cleared"].Items, "the old generation is not counted")
	require.Equal(t, 2, byID["uncommitted"].Items, "an uncommitted batch is not counted")
	require.Equal(t, 2, byID["popping"].Items, "a committed pop is counted as applied")
	require.Zero(t, byID["no-session-doc"].Items)
	require.Len(t, byID["checkpoints"].Checkpoints, 2)
	require.Equal(t, len(ids)-2, nonEmpty)
}

// TestSummarizeSessionsQueries counts the commands of a summary: fixed,
// whatever the number of sessions, plus the checkpoint reads of the
// sessions holding checkpoints.
func TestSummarizeSessionsQueries(t *testing.T) {
	ctx := context.Background()
	st, log := loggedStore(t)
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		require.NoError(t, mustSession(t, st, id).AddItems(ctx, numbered(id, 3)))
		ids = append(ids, id)
	}
	log.take()
	sums, err := st.SummarizeSessions(ctx, ids, nil)
	require.NoError(t, err)
	for _, s := range sums {
		require.Equal(t, 3, s.Items)
	}
	require.ElementsMatch(t, []string{"find agent_sessions", "find agent_messages", "distinct agent_checkpoints"}, log.take())
}
