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

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// The benchmarks compare the adapter with the raw driver doing the least
// work that gives the same result on the same layout, in the same run, on
// the same client and server, interleaving the two so that drift (a
// growing collection, a busy machine) hits both alike. They report the
// adapter's ns/op, the raw calls' raw-ns/op, and x-raw, the ratio. On
// FerretDB absolute numbers mean nothing (every filter scans the
// collection); the ratio and the round trips (TestRoundTrips) do.

// benchEnv is a Store, a raw handle on its collections, and a clock for
// the two sides.
type benchEnv struct {
	ctx      context.Context
	st       *Store
	sessions *mongodrv.Collection
	messages *mongodrv.Collection
	raw, our time.Duration
}

func newBenchEnv(b *testing.B) *benchEnv {
	st := newTestStore(b, Options{})
	return &benchEnv{ctx: context.Background(), st: st, sessions: st.sessions, messages: st.messages}
}

// pair times one raw call and one adapter call.
func (e *benchEnv) pair(raw, ours func()) {
	t0 := time.Now()
	raw()
	t1 := time.Now()
	ours()
	e.raw += t1.Sub(t0)
	e.our += time.Since(t1)
}

func (e *benchEnv) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(e.our.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(e.raw.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(float64(e.our)/float64(e.raw), "x-raw")
}

// rawAppend is the raw driver's append: reserve seqs with $inc, insert one
// batch document.
func (e *benchEnv) rawAppend(b *testing.B, id string, strs bson.A) {
	var sd sessionDoc
	err := e.sessions.FindOneAndUpdate(e.ctx, bson.D{{Key: fSessionID, Value: id}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: fSeq, Value: int64(len(strs))}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&sd)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.messages.InsertOne(e.ctx, bson.D{
		{Key: fSessionID, Value: id}, {Key: fMsgSeq, Value: sd.Seq}, {Key: fMsgGeneration, Value: sd.Generation},
		{Key: fMessageData, Value: strs}, {Key: fCreatedAt, Value: time.Now()},
	}); err != nil {
		b.Fatal(err)
	}
}

func asStrings(items []session.Item) bson.A {
	out := make(bson.A, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}

// history gives both sides 1k items in batches of 20.
func (e *benchEnv) history(b *testing.B, s *Session, rawID string) {
	for i := range 50 {
		items := numbered(fmt.Sprintf("h%d", i), 20)
		require.NoError(b, s.AddItems(e.ctx, items))
		e.rawAppend(b, rawID, asStrings(items))
	}
}

// reset empties both sides.
func (e *benchEnv) reset(b *testing.B, s *Session, rawID string) {
	require.NoError(b, s.Clear(e.ctx))
	_, err := e.messages.DeleteMany(e.ctx, bson.D{{Key: fSessionID, Value: rawID}})
	require.NoError(b, err)
}

func BenchmarkAppend20(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	items := numbered("x", 20)
	strs := asStrings(items)
	e.history(b, s, "raw") // warm: indexes, connections, estimator
	b.ResetTimer()
	for i := range b.N {
		if i%100 == 99 { // keep the collections near 1k items
			b.StopTimer()
			e.reset(b, s, "raw")
			b.StartTimer()
		}
		e.pair(func() { e.rawAppend(b, "raw", strs) }, func() {
			if err := s.AddItems(e.ctx, items); err != nil {
				b.Fatal(err)
			}
		})
	}
	e.report(b)
}

func BenchmarkLatest50(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	e.history(b, s, "raw")
	rawLatest := func() {
		// The raw driver knows the batch size: 3 documents hold the newest
		// 50 items.
		cur, err := e.messages.Find(e.ctx, bson.D{{Key: fSessionID, Value: "raw"}},
			options.Find().SetSort(bson.D{{Key: fMsgSeq, Value: -1}}).SetLimit(3))
		if err != nil {
			b.Fatal(err)
		}
		var docs []struct {
			Data []string `bson:"message_data"`
		}
		if err := cur.All(e.ctx, &docs); err != nil {
			b.Fatal(err)
		}
		var out []session.Item
		for _, d := range docs {
			for j := len(d.Data) - 1; j >= 0 && len(out) < 50; j-- {
				it, err := driver.DecodeStored([]byte(d.Data[j]))
				if err != nil {
					b.Fatal(err)
				}
				out = append(out, it)
			}
		}
		if len(out) != 50 {
			b.Fatalf("raw latest: %d items", len(out))
		}
	}
	b.ResetTimer()
	for range b.N {
		e.pair(rawLatest, func() {
			got, err := s.LatestItems(e.ctx, 50)
			if err != nil || len(got) != 50 {
				b.Fatalf("latest: %d items, %v", len(got), err)
			}
		})
	}
	e.report(b)
}

func BenchmarkPop(b *testing.B) {
	e := newBenchEnv(b)
	s := mustSession(b, e.st, "ours")
	e.history(b, s, "raw")
	rawPop := func() {
		var d struct {
			Data []string `bson:"message_data"`
		}
		err := e.messages.FindOneAndUpdate(e.ctx,
			bson.D{{Key: fSessionID, Value: "raw"}, {Key: fMessageData, Value: bson.D{{Key: "$ne", Value: bson.A{}}}}},
			bson.D{{Key: "$pop", Value: bson.D{{Key: fMessageData, Value: 1}}}},
			options.FindOneAndUpdate().SetSort(bson.D{{Key: fMsgSeq, Value: -1}}).SetReturnDocument(options.Before)).Decode(&d)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := driver.DecodeStored([]byte(d.Data[len(d.Data)-1])); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if i%500 == 499 { // refill before the 1k items run out
			b.StopTimer()
			e.reset(b, s, "raw")
			e.history(b, s, "raw")
			b.StartTimer()
		}
		e.pair(rawPop, func() {
			if _, ok, err := s.PopItem(e.ctx); err != nil || !ok {
				b.Fatalf("pop: %v %v", ok, err)
			}
		})
	}
	e.report(b)
}
