package mongo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
	"github.com/agentsessions/sessions/session"
)

// The benchmarks compare the adapter with the tightest raw-driver calls
// for the same work, on the same client and server, interleaved op by op
// with internal/testkit/interleave (medians per side: raw-ns/op,
// lib-ns/op, x-raw = lib ÷ raw). The raw side keeps its batches in a
// collection of its own in the same database, raw_messages, one document
// per batch {session_id, message_data: [item strings]} under a
// driver-made ObjectId, with an index on {session_id, _id}:
//
//	append 20   raw: one InsertOne of the batch document (no session
//	            document, no sequence number reserved)
//	latest 50   raw: one Find of the session's newest batch documents,
//	            sorted by _id descending, limited to as many as hold 50
//	            items (the raw code knows its batch size), message_data
//	            decoded into strings; no JSON check
//	pop         raw: one FindOneAndUpdate $pop of the newest non-empty
//	            batch document, the popped string taken from the document
//	            before the update
//
// The adapter does more: a session document and a sequence number per
// batch (the Python SDK's layout), reads that agree with a concurrent
// clear, a JSON check of every item. On FerretDB absolute numbers say
// little (every filter is a query on its PostgreSQL backend); the ratios
// and the round trips (TestRoundTrips) do.

// benchEnv is a Store, the raw side's collection, and a context.
type benchEnv struct {
	ctx context.Context
	st  *Store
	raw *mongodrv.Collection
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	st := newTestStore(b, Options{})
	e := &benchEnv{ctx: context.Background(), st: st, raw: st.messages.Database().Collection("raw_messages")}
	_, err := e.raw.Indexes().CreateOne(e.ctx, mongodrv.IndexModel{Keys: bson.D{{Key: "session_id", Value: 1}, {Key: "_id", Value: 1}}})
	require.NoError(b, err)
	return e
}

// rawDoc is the raw side's batch document.
type rawDoc struct {
	SessionID string   `bson:"session_id"`
	Data      []string `bson:"message_data"`
}

func asStrings(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// rawAppend is the raw side's append: one InsertOne.
func (e *benchEnv) rawAppend(b *testing.B, id string, strs []string) {
	if _, err := e.raw.InsertOne(e.ctx, rawDoc{SessionID: id, Data: strs}); err != nil {
		b.Fatal(err)
	}
}

// history gives both sides n items in batches of batch items: the adapter
// with AddItems, the raw side with one InsertMany.
func (e *benchEnv) history(b *testing.B, s *Session, n, batch int) {
	b.Helper()
	var docs []any
	for i := range n / batch {
		items := numbered(fmt.Sprintf("h%d", i), batch)
		require.NoError(b, s.AddItems(e.ctx, items))
		docs = append(docs, rawDoc{SessionID: "raw", Data: asStrings(items)})
	}
	_, err := e.raw.InsertMany(e.ctx, docs)
	require.NoError(b, err)
}

// reset empties both sides.
func (e *benchEnv) reset(b *testing.B, s *Session) {
	b.Helper()
	require.NoError(b, s.Clear(e.ctx))
	_, err := e.raw.DeleteMany(e.ctx, bson.D{{Key: "session_id", Value: "raw"}})
	require.NoError(b, err)
}

// schemaAppend is raw code on the adapter's layout (the Python SDK's): a
// FindOneAndUpdate that creates the session document or reserves the
// batch's sequence numbers with $inc, then one InsertOne of the batch
// document into the adapter's messages collection.
func (e *benchEnv) schemaAppend(b *testing.B, id string, strs []string) {
	var sd sessionDoc
	err := e.st.sessions.FindOneAndUpdate(e.ctx, bson.D{{Key: fSessionID, Value: id}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: fSeq, Value: int64(len(strs))}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&sd)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.st.messages.InsertOne(e.ctx, bson.D{
		{Key: fSessionID, Value: id}, {Key: fMsgSeq, Value: sd.Seq}, {Key: fMsgGeneration, Value: sd.Generation},
		{Key: fMessageData, Value: strs}, {Key: fCreatedAt, Value: time.Now()},
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend20 appends a 20-item batch; every side is emptied every
// 100 rounds, untimed, so that the collections stay near 2k items. Beside
// raw (one InsertOne), raw-schema is raw code on the adapter's layout
// (schemaAppend: two round trips, as the layout needs).
func BenchmarkAppend20(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	items := numbered("x", 20)
	strs := asStrings(items)
	rounds := 0
	interleave.Run(b, func() {
		if rounds%100 == 99 {
			e.reset(b, s)
			_, err := e.st.messages.DeleteMany(e.ctx, bson.D{{Key: fSessionID, Value: "schema"}})
			require.NoError(b, err)
		}
		rounds++
	}, func() {
		if err := s.AddItems(e.ctx, items); err != nil {
			b.Fatal(err)
		}
	}, interleave.Side{Name: "raw", Op: func() { e.rawAppend(b, "raw", strs) }},
		interleave.Side{Name: "raw-schema", Op: func() { e.schemaAppend(b, "schema", strs) }})
}

// BenchmarkLatest50 reads the newest 50 items of a history of 1k items
// (batches of 20: the raw side reads 3 documents) and of 100k items
// (batches of 1000, so that the fixture builds in seconds: the raw side
// reads 1 document). On FerretDB the 100k case takes seconds per call on
// both sides (its backend sorts the session's documents for every find),
// so make chart runs the 1k case only.
func BenchmarkLatest50(b *testing.B) {
	for _, c := range []struct{ size, batch int }{{1000, 20}, {100_000, 1000}} {
		b.Run(fmt.Sprintf("history=%d", c.size), func(b *testing.B) {
			e := newBenchEnv(b)
			s := mustSession(b, e.st, "ours")
			e.history(b, s, c.size, c.batch)
			docs := int64((50 + c.batch - 1) / c.batch)
			find := options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(docs)
			interleave.Run(b, nil, func() {
				got, err := s.LatestItems(e.ctx, 50)
				if err != nil || len(got) != 50 {
					b.Fatalf("latest: %d items, %v", len(got), err)
				}
			}, interleave.Side{Name: "raw", Op: func() {
				cur, err := e.raw.Find(e.ctx, bson.D{{Key: "session_id", Value: "raw"}}, find)
				if err != nil {
					b.Fatal(err)
				}
				var got []rawDoc
				if err := cur.All(e.ctx, &got); err != nil {
					b.Fatal(err)
				}
				out := make([]string, 0, 50)
				for _, d := range got {
					for j := len(d.Data) - 1; j >= 0 && len(out) < 50; j-- {
						out = append(out, d.Data[j])
					}
				}
				if len(out) != 50 {
					b.Fatalf("raw latest: %d items", len(out))
				}
			}})
		})
	}
}

// BenchmarkPop pops the newest item of a history of 1k items (batches of
// 20), both sides refilled, untimed, every 500 rounds.
func BenchmarkPop(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	rounds := 0
	pop := options.FindOneAndUpdate().SetSort(bson.D{{Key: "_id", Value: -1}}).SetReturnDocument(options.Before)
	filter := bson.D{{Key: "session_id", Value: "raw"}, {Key: "message_data", Value: bson.D{{Key: "$ne", Value: bson.A{}}}}}
	update := bson.D{{Key: "$pop", Value: bson.D{{Key: "message_data", Value: 1}}}}
	interleave.Run(b, func() {
		if rounds%500 == 0 {
			e.reset(b, s)
			e.history(b, s, 1000, 20)
		}
		rounds++
	}, func() {
		if _, ok, err := s.PopItem(e.ctx); err != nil || !ok {
			b.Fatalf("pop: %v %v", ok, err)
		}
	}, interleave.Side{Name: "raw", Op: func() {
		var d rawDoc
		if err := e.raw.FindOneAndUpdate(e.ctx, filter, update, pop).Decode(&d); err != nil {
			b.Fatal(err)
		}
		if len(d.Data) == 0 || d.Data[len(d.Data)-1] == "" {
			b.Fatal("raw pop: nothing popped")
		}
	}})
}
