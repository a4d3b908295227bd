package mongo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
)

// pyMongo issues, with the same driver calls, filters, updates and
// options, the operations of the Python SDK's MongoDBSession (batch
// layout: one document per add_items call, a generation per clear), as
// docs/semantics.md §2 describes them:
//
//	add_items:     find_one_and_update({session_id},
//	                   {$setOnInsert: {session_id, created_at, _generation: 0},
//	                    $set: {updated_at}, $inc: {_seq: n}},
//	                   upsert=True, return_document=AFTER)
//	               insert_one({session_id, seq: _seq - 1, generation: _generation or 0,
//	                   message_data: [json.dumps(item, separators=(",", ":")), ...]})
//	get_items:     find_one({session_id}) for the generation, then
//	               find({session_id, generation}).sort(seq, 1), or
//	               .sort(seq, -1).limit(w) with w doubling for latest-N;
//	               json.loads each string, skipping those that fail
//	pop_item:      delete_many({session_id, generation, message_data: []}),
//	               then find_one_and_update of the newest document with a
//	               pipeline that $slices off the last element of message_data
//	               (return_document=BEFORE); a legacy document (message_data
//	               a string) is find_one_and_delete'd
//	clear_session: find_one_and_update({session_id}, {$inc: {_generation: 1}}),
//	               then delete_many({session_id, generation: {$ne: new}})
//
// The generation filter matches legacy documents (no generation field) in
// generation 0. FerretDB v1 has no pipeline updates: there the pop's
// $slice pipeline is replaced by the equivalent {$pop: {message_data: 1}},
// the one operator with the same effect on an array.
type pyMongo struct {
	t        *testing.T
	id       string
	sessions *mongodrv.Collection
	messages *mongodrv.Collection
}

func newPyMongo(t *testing.T, st *Store, id string) *pyMongo {
	p := &pyMongo{t: t, id: id, sessions: st.sessions, messages: st.messages}
	p.ensureIndexes()
	return p
}

// ensureIndexes is _ensure_indexes.
func (p *pyMongo) ensureIndexes() {
	ctx := context.Background()
	_, err := p.sessions.Indexes().CreateOne(ctx, mongodrv.IndexModel{
		Keys: bson.D{{Key: "session_id", Value: 1}}, Options: options.Index().SetUnique(true)})
	require.NoError(p.t, err)
	_, err = p.messages.Indexes().CreateOne(ctx, mongodrv.IndexModel{
		Keys: bson.D{{Key: "session_id", Value: 1}, {Key: "generation", Value: 1}, {Key: "seq", Value: 1}}})
	require.NoError(p.t, err)
}

// generationFilter matches generation g; generation 0 also holds legacy
// documents, which have no generation field.
func generationFilter(g int64) any {
	if g == 0 {
		return bson.D{{Key: "$in", Value: bson.A{int64(0), nil}}}
	}
	return g
}

// generation reads the session's current generation (0 without a session
// document).
func (p *pyMongo) generation(ctx context.Context) int64 {
	var doc bson.M
	err := p.sessions.FindOne(ctx, bson.D{{Key: "session_id", Value: p.id}}).Decode(&doc)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return 0
	}
	require.NoError(p.t, err)
	g, _ := integer(bsonValue(p.t, doc["_generation"]))
	return g
}

// bsonValue turns a decoded value back into a RawValue for integer().
func bsonValue(t *testing.T, v any) bson.RawValue {
	if v == nil {
		return bson.RawValue{}
	}
	typ, data, err := bson.MarshalValue(v)
	require.NoError(t, err)
	return bson.RawValue{Type: typ, Value: data}
}

// addItems is add_items. It returns the write's error: the caller asserts
// that none fails.
func (p *pyMongo) addItems(items []string) error {
	ctx := context.Background()
	if len(items) == 0 {
		return nil
	}
	now := time.Now().UTC()
	var result bson.M
	err := p.sessions.FindOneAndUpdate(ctx,
		bson.D{{Key: "session_id", Value: p.id}},
		bson.D{
			{Key: "$setOnInsert", Value: bson.D{{Key: "session_id", Value: p.id}, {Key: "created_at", Value: now}, {Key: "_generation", Value: 0}}},
			{Key: "$set", Value: bson.D{{Key: "updated_at", Value: now}}},
			{Key: "$inc", Value: bson.D{{Key: "_seq", Value: len(items)}}},
		},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&result)
	if err != nil {
		return err
	}
	seq, _ := integer(bsonValue(p.t, result["_seq"]))
	gen, _ := integer(bsonValue(p.t, result["_generation"]))
	data := bson.A{}
	for _, it := range items {
		data = append(data, it)
	}
	_, err = p.messages.InsertOne(ctx, bson.D{
		{Key: "session_id", Value: p.id},
		{Key: "seq", Value: seq - 1},
		{Key: "generation", Value: gen},
		{Key: "message_data", Value: data},
	})
	return err
}

// flatten appends a document's items (json.loads-able strings only) to out.
func flatten(out []string, md any) []string {
	loads := func(s string) bool {
		var v any
		return json.Unmarshal([]byte(s), &v) == nil || jsonWithNaN(s)
	}
	switch md := md.(type) {
	case bson.A:
		for _, e := range md {
			if s, ok := e.(string); ok && loads(s) {
				out = append(out, s)
			}
		}
	case string:
		if loads(md) {
			out = append(out, md)
		}
	}
	return out
}

// jsonWithNaN reports a text Python's json.loads accepts although
// encoding/json does not: one whose only non-JSON tokens are NaN,
// Infinity and -Infinity (what session's validator accepts too).
func jsonWithNaN(s string) bool {
	_, err := session.ParseItem(s)
	return err == nil
}

// getItems is get_items: limit < 0 means None (everything).
func (p *pyMongo) getItems(limit int) []string {
	ctx := context.Background()
	if limit == 0 {
		return nil
	}
	filter := bson.D{{Key: "session_id", Value: p.id}, {Key: "generation", Value: generationFilter(p.generation(ctx))}}
	if limit < 0 {
		cur, err := p.messages.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "seq", Value: 1}}))
		require.NoError(p.t, err)
		var docs []bson.M
		require.NoError(p.t, cur.All(ctx, &docs))
		var out []string
		for _, d := range docs {
			out = flatten(out, d["message_data"])
		}
		return out
	}
	for w := limit; ; w *= 2 {
		cur, err := p.messages.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "seq", Value: -1}}).SetLimit(int64(w)))
		require.NoError(p.t, err)
		var docs []bson.M
		require.NoError(p.t, cur.All(ctx, &docs))
		slices.Reverse(docs)
		var out []string
		for _, d := range docs {
			out = flatten(out, d["message_data"])
		}
		if len(out) >= limit || len(docs) < w {
			return out[max(0, len(out)-limit):]
		}
	}
}

// popItem is pop_item; ok is false when nothing was popped.
func (p *pyMongo) popItem() (string, bool, error) {
	ctx := context.Background()
	gen := p.generation(ctx)
	base := bson.D{{Key: "session_id", Value: p.id}, {Key: "generation", Value: generationFilter(gen)}}
	if _, err := p.messages.DeleteMany(ctx, append(slices.Clone(base), bson.E{Key: "message_data", Value: bson.A{}})); err != nil {
		return "", false, err
	}
	for {
		var newest bson.M
		err := p.messages.FindOne(ctx, base, options.FindOne().SetSort(bson.D{{Key: "seq", Value: -1}})).Decode(&newest)
		if errors.Is(err, mongodrv.ErrNoDocuments) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		var data []string
		switch md := newest["message_data"].(type) {
		case string:
			var doc bson.M
			if err := p.messages.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: newest["_id"]}}).Decode(&doc); err != nil {
				return "", false, err
			}
			data = flatten(nil, doc["message_data"])
		case bson.A:
			if len(md) == 0 {
				if _, err := p.messages.DeleteOne(ctx, bson.D{{Key: "_id", Value: newest["_id"]}}); err != nil {
					return "", false, err
				}
				continue
			}
			doc, err := p.sliceLast(ctx, newest["_id"])
			if err != nil {
				return "", false, err
			}
			if md, ok := doc["message_data"].(bson.A); ok && len(md) > 0 {
				data = flatten(nil, md[len(md)-1:])
			}
		default:
			if _, err := p.messages.DeleteOne(ctx, bson.D{{Key: "_id", Value: newest["_id"]}}); err != nil {
				return "", false, err
			}
			continue
		}
		if len(data) == 1 {
			return data[0], true, nil
		}
		// Corrupt: dropped, as the SDK does; try the next.
	}
}

// sliceLast removes the last element of a document's message_data with
// the SDK's pipeline update, returning the document as it was; on a
// server without pipeline updates (FerretDB v1), with $pop.
func (p *pyMongo) sliceLast(ctx context.Context, id any) (bson.M, error) {
	filter := bson.D{{Key: "_id", Value: id}, {Key: "message_data", Value: bson.D{{Key: "$ne", Value: bson.A{}}}}}
	opts := options.FindOneAndUpdate().SetReturnDocument(options.Before)
	pipeline := bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "message_data", Value: bson.D{{Key: "$slice", Value: bson.A{
		"$message_data", bson.D{{Key: "$subtract", Value: bson.A{bson.D{{Key: "$size", Value: "$message_data"}}, 1}}},
	}}}}}}}}
	var doc bson.M
	err := p.messages.FindOneAndUpdate(ctx, filter, pipeline, opts).Decode(&doc)
	var se mongodrv.ServerError
	if err != nil && errors.As(err, &se) && !errors.Is(err, mongodrv.ErrNoDocuments) {
		err = p.messages.FindOneAndUpdate(ctx, filter,
			bson.D{{Key: "$pop", Value: bson.D{{Key: "message_data", Value: 1}}}}, opts).Decode(&doc)
	}
	return doc, err
}

// clearSession is clear_session.
func (p *pyMongo) clearSession() error {
	ctx := context.Background()
	var doc bson.M
	err := p.sessions.FindOneAndUpdate(ctx, bson.D{{Key: "session_id", Value: p.id}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "_generation", Value: 1}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&doc)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return nil
	}
	if err != nil {
		return err
	}
	g, _ := integer(bsonValue(p.t, doc["_generation"]))
	_, err = p.messages.DeleteMany(ctx, bson.D{{Key: "session_id", Value: p.id}, {Key: "generation", Value: bson.D{{Key: "$ne", Value: g}}}})
	return err
}

// pyLegacyAdd is add_items of the SDK's older releases (per-item
// documents, no generation): find_one_and_update({session_id},
// {$setOnInsert: {session_id, created_at}, $set: {updated_at},
// $inc: {_seq: n}}, upsert=True, return_document=AFTER), then
// insert_many([{session_id, seq: _seq - n + i, message_data: str}],
// ordered=True).
func (p *pyMongo) pyLegacyAdd(items []string) error {
	ctx := context.Background()
	now := time.Now().UTC()
	var result bson.M
	err := p.sessions.FindOneAndUpdate(ctx,
		bson.D{{Key: "session_id", Value: p.id}},
		bson.D{
			{Key: "$setOnInsert", Value: bson.D{{Key: "session_id", Value: p.id}, {Key: "created_at", Value: now}}},
			{Key: "$set", Value: bson.D{{Key: "updated_at", Value: now}}},
			{Key: "$inc", Value: bson.D{{Key: "_seq", Value: len(items)}}},
		},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
	).Decode(&result)
	if err != nil {
		return err
	}
	seq, _ := integer(bsonValue(p.t, result["_seq"]))
	next := seq - int64(len(items))
	docs := make([]any, len(items))
	for i, it := range items {
		docs[i] = bson.D{{Key: "session_id", Value: p.id}, {Key: "seq", Value: next + int64(i)}, {Key: "message_data", Value: it}}
	}
	_, err = p.messages.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
	return err
}

// interopOp is one operation of either side on a shared session, applied
// to the model of the history too.
type interopOp struct {
	name string
	do   func(t *testing.T, g *Session, py *pyMongo, model []string, tag string) []string
}

// interopOps are Go's and Python's writes, with 1-item and n-item batches.
func interopOps() []interopOp {
	ctx := context.Background()
	goAdd := func(n int) func(*testing.T, *Session, *pyMongo, []string, string) []string {
		return func(t *testing.T, g *Session, _ *pyMongo, model []string, tag string) []string {
			items := numbered(tag, n)
			require.NoError(t, g.AddItems(ctx, items), "Go add")
			return append(model, texts(items)...)
		}
	}
	pyAdd := func(n int) func(*testing.T, *Session, *pyMongo, []string, string) []string {
		return func(t *testing.T, _ *Session, py *pyMongo, model []string, tag string) []string {
			items := texts(numbered(tag, n))
			require.NoError(t, py.addItems(items), "Python add_items must never fail")
			return append(model, items...)
		}
	}
	return []interopOp{
		{"go-add-1", goAdd(1)},
		{"go-add-3", goAdd(3)},
		{"py-add-1", pyAdd(1)},
		{"py-add-3", pyAdd(3)},
		{"go-pop", func(t *testing.T, g *Session, _ *pyMongo, model []string, _ string) []string {
			it, ok, err := g.PopItem(ctx)
			require.NoError(t, err, "Go pop")
			require.Equal(t, len(model) > 0, ok)
			if !ok {
				return model
			}
			require.Equal(t, model[len(model)-1], it.String(), "Go pops the newest item")
			return model[:len(model)-1]
		}},
		{"py-pop", func(t *testing.T, _ *Session, py *pyMongo, model []string, _ string) []string {
			it, ok, err := py.popItem()
			require.NoError(t, err, "Python pop_item must never fail")
			require.Equal(t, len(model) > 0, ok)
			if !ok {
				return model
			}
			require.Equal(t, model[len(model)-1], it, "Python pops the newest item")
			return model[:len(model)-1]
		}},
		{"go-clear", func(t *testing.T, g *Session, _ *pyMongo, _ []string, _ string) []string {
			require.NoError(t, g.Clear(ctx), "Go clear")
			return nil
		}},
		{"py-clear", func(t *testing.T, _ *Session, py *pyMongo, _ []string, _ string) []string {
			require.NoError(t, py.clearSession(), "Python clear_session must never fail")
			return nil
		}},
		{"go-replace-2", func(t *testing.T, g *Session, _ *pyMongo, _ []string, tag string) []string {
			items := numbered(tag, 2)
			require.NoError(t, g.ReplaceItems(ctx, items), "Go replace")
			return texts(items)
		}},
	}
}

// assertAgree checks that Go and Python read model, in full and as the
// latest 1, 2, 3 and 5 items.
func assertAgree(t *testing.T, g *Session, py *pyMongo, model []string, after string) {
	t.Helper()
	ctx := context.Background()
	got, err := g.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, nilIfEmpty(model), nilIfEmpty(texts(got)), "Go reads the history after %s", after)
	require.Equal(t, nilIfEmpty(model), nilIfEmpty(py.getItems(-1)), "Python reads the history after %s", after)
	for _, n := range []int{1, 2, 3, 5} {
		want := model[max(0, len(model)-n):]
		got, err := g.LatestItems(ctx, n)
		require.NoError(t, err)
		require.Equal(t, nilIfEmpty(want), nilIfEmpty(texts(got)), "Go's latest %d after %s", n, after)
		require.Equal(t, nilIfEmpty(want), nilIfEmpty(py.getItems(n)), "Python's latest %d after %s", n, after)
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestPythonInterop interleaves the Python SDK's exact operations with
// Go's AddItems, PopItem, Clear and ReplaceItems on one session: every
// ordered pair of operations, from a history holding legacy per-item
// documents, Python batches and Go batches, then a longer fixed sequence.
// Both sides must read the same items in the same order after every step,
// and no write of either side may fail (before the fix, a one-item Python
// append right after a Go write failed with E11000, and the two sides
// disagreed on the order).
func TestPythonInterop(t *testing.T) {
	ops := interopOps()
	for _, first := range ops {
		t.Run(first.name, func(t *testing.T) {
			st := newTestStore(t, Options{})
			for _, second := range ops {
				id := first.name + "+" + second.name
				g := mustSession(t, st, id)
				py := newPyMongo(t, st, id)
				// Older Python release, then the newer one, then Go.
				legacy := texts(numbered("legacy", 2))
				require.NoError(t, py.pyLegacyAdd(legacy))
				model := append([]string{}, legacy...)
				model = ops[3].do(t, g, py, model, "p0") // py-add-3
				model = ops[0].do(t, g, py, model, "g0") // go-add-1
				assertAgree(t, g, py, model, "setup")
				model = first.do(t, g, py, model, "a")
				assertAgree(t, g, py, model, first.name)
				model = second.do(t, g, py, model, "b")
				assertAgree(t, g, py, model, first.name+", "+second.name)
				// And a one-item append by each side after both.
				model = ops[2].do(t, g, py, model, "c")
				model = ops[0].do(t, g, py, model, "d")
				assertAgree(t, g, py, model, first.name+", "+second.name+", py-add-1, go-add-1")
			}
		})
	}

	t.Run("a long mixed sequence", func(t *testing.T) {
		st := newTestStore(t, Options{})
		g := mustSession(t, st, "long")
		py := newPyMongo(t, st, "long")
		var model []string
		seq := []int{2, 0, 3, 1, 4, 2, 5, 0, 6, 2, 2, 1, 7, 3, 0, 8, 2, 4, 4, 5, 1, 0, 2}
		for i, k := range seq {
			model = ops[k].do(t, g, py, model, fmt.Sprint("s", i))
			assertAgree(t, g, py, model, fmt.Sprintf("step %d (%s)", i, ops[k].name))
		}
	})
}

// TestPythonNumbering pins the numbering: a batch's seq is the 0-based
// position of its last item, on both sides, including after clears and
// replaces, so the two sides never hand out one seq twice.
func TestPythonNumbering(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	g := mustSession(t, st, "num")
	py := newPyMongo(t, st, "num")
	require.NoError(t, g.AddItems(ctx, numbered("a", 3)))
	require.NoError(t, py.addItems(texts(numbered("b", 1))))
	require.NoError(t, g.Clear(ctx))
	require.NoError(t, py.addItems(texts(numbered("c", 1))))
	require.NoError(t, g.AddItems(ctx, numbered("d", 2)))
	var seqs []int64
	for _, d := range r.messageDocs("num") {
		seqs = append(seqs, d[fMsgSeq].(int64))
	}
	// a: 0-2 (seq 2), b: 3, clear's marker: 4, c: 5, d: 6-7 (seq 7); the
	// documents below the marker are gone.
	require.Equal(t, []int64{4, 5, 7}, seqs)
	require.EqualValues(t, 8, r.session("num")[fSeq])
	require.Equal(t, texts(append(numbered("c", 1), numbered("d", 2)...)), py.getItems(-1))
}

// TestNaNAndInfinityRoundTrip: Python's json.dumps writes NaN, Infinity
// and -Infinity (allow_nan=True), so real stores hold them. Records holding
// them read back byte for byte through every path, whichever side wrote
// them, and pop returns them instead of treating them as corrupt.
func TestNaNAndInfinityRoundTrip(t *testing.T) {
	ctx := context.Background()
	var rep reports
	st := newTestStore(t, Options{OnCorrupt: rep.handler()})
	texts := []string{`{"x":NaN}`, `{"y":-Infinity}`, `{"z":[Infinity,1,NaN],"s":"NaN"}`, `{"x": NaN, "nested": {"v": -Infinity}}`}
	items := make([]session.Item, len(texts))
	for i, s := range texts {
		it, err := session.ParseItem(s)
		require.NoError(t, err, "session accepts %s", s)
		items[i] = it
	}
	g := mustSession(t, st, "nan")
	py := newPyMongo(t, st, "nan")
	require.NoError(t, g.AddItems(ctx, items[:2]))
	require.NoError(t, py.addItems(texts[2:]))

	got, err := g.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts, textsOf(got), "Go reads them back exactly")
	require.Equal(t, texts, py.getItems(-1), "Python reads them back exactly")
	latest, err := g.LatestItems(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, texts[1:], textsOf(latest))
	require.Empty(t, rep.take(), "none is reported as corrupt")

	for i := len(texts) - 1; i >= 0; i-- {
		it, ok, err := g.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, texts[i], it.String(), "pop returns it exactly")
	}
	require.Empty(t, rep.take())
	require.NoError(t, g.ReplaceItems(ctx, items))
	require.Equal(t, texts, py.getItems(-1), "a replace stores them exactly")
}

// textsOf returns the items' JSON texts.
func textsOf(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.String()
	}
	return out
}
