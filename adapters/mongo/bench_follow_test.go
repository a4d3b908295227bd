package mongo

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
)

// BenchmarkAppendOnce20 appends a 20-item batch under a new operation id,
// beside raw (one InsertOne of the batch, as BenchmarkAppend20) and
// add-items (the adapter's AddItems of the same batch to another session):
// x-add-items is what recording the id costs over a plain append.
func BenchmarkAppendOnce20(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	plain := mustSession(b, e.st, "plain")
	items := numbered("x", 20)
	strs := asStrings(items)
	rounds, ops := 0, 0
	interleave.Run(b, func() {
		if rounds%100 == 99 {
			e.reset(b, s)
			require.NoError(b, plain.Clear(e.ctx))
		}
		rounds++
	}, func() {
		ops++
		if ok, err := s.AddItemsOnce(e.ctx, "op-"+strconv.Itoa(ops), items); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}, interleave.Side{Name: "raw", Op: func() { e.rawAppend(b, "raw", strs) }},
		interleave.Side{Name: "add-items", Op: func() {
			if err := plain.AddItems(e.ctx, items); err != nil {
				b.Fatal(err)
			}
		}})
}

// BenchmarkFollow20 reads what is new after a cursor: before every round,
// untimed, 20 items are appended to a history of 1k (batches of 20) on
// both sides. raw finds the raw side's documents after the last _id it
// read (one Find on {session_id, _id}); latest-20 is the adapter's
// LatestItems(20), the read a follower without a cursor would make.
func BenchmarkFollow20(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	e.history(b, s, 1000, 20)
	_, cur, err := s.ItemsSince(e.ctx, "")
	require.NoError(b, err)
	var last bson.ObjectID
	{
		var d struct {
			ID bson.ObjectID `bson:"_id"`
		}
		require.NoError(b, e.raw.FindOne(e.ctx, bson.D{{Key: "session_id", Value: "raw"}},
			options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&d))
		last = d.ID
	}
	round := 0
	interleave.Run(b, func() {
		round++
		items := numbered(fmt.Sprintf("n%d", round), 20)
		require.NoError(b, s.AddItems(e.ctx, items))
		e.rawAppend(b, "raw", asStrings(items))
	}, func() {
		got, next, err := s.ItemsSince(e.ctx, cur)
		if err != nil || len(got) == 0 {
			b.Fatal(len(got), err)
		}
		cur = next
	}, interleave.Side{Name: "raw", Op: func() {
		c, err := e.raw.Find(e.ctx, bson.D{{Key: "session_id", Value: "raw"}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			b.Fatal(err)
		}
		var docs []struct {
			ID   bson.ObjectID `bson:"_id"`
			Data []string      `bson:"message_data"`
		}
		if err := c.All(e.ctx, &docs); err != nil || len(docs) == 0 {
			b.Fatal(len(docs), err)
		}
		last = docs[len(docs)-1].ID
	}}, interleave.Side{Name: "latest-20", Op: func() {
		if _, err := s.LatestItems(e.ctx, 20); err != nil {
			b.Fatal(err)
		}
	}})
}

// BenchmarkSummarizePage50 summarizes a page of 50 sessions of 40 items
// (batches of 20) with SummarizeSessions, beside per-session: what
// sessionctl list does without a Summarizer, Items, ListCheckpoints and
// the session document's times for each session.
func BenchmarkSummarizePage50(b *testing.B) {
	e := newBenchEnv(b)
	var ids []string
	for i := range 50 {
		id := fmt.Sprintf("s%02d", i)
		s := mustSession(b, e.st, id)
		for k := range 2 {
			require.NoError(b, s.AddItems(e.ctx, numbered(fmt.Sprintf("%s-%d", id, k), 20)))
		}
		ids = append(ids, id)
	}
	u := &urlStore{st: e.st}
	interleave.Run(b, nil, func() {
		sums, err := e.st.SummarizeSessions(e.ctx, ids, nil)
		if err != nil || sums[0].Items != 40 {
			b.Fatal(err)
		}
	}, interleave.Side{Name: "per-session", Op: func() {
		for _, id := range ids {
			s := mustSession(b, e.st, id)
			items, err := s.Items(e.ctx)
			if err != nil || len(items) != 40 {
				b.Fatal(err)
			}
			if _, err := s.ListCheckpoints(e.ctx); err != nil {
				b.Fatal(err)
			}
			if _, _, err := u.SessionTimes(e.ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}})
}
