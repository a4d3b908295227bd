package mongo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
)

// raw gives a test direct access to a Store's collections.
type raw struct {
	t        *testing.T
	sessions *mongodrv.Collection
	messages *mongodrv.Collection
}

func rawOf(t *testing.T, st *Store) raw { return raw{t, st.sessions, st.messages} }

// session returns the session document of id, or nil.
func (r raw) session(id string) bson.M {
	r.t.Helper()
	var m bson.M
	err := r.sessions.FindOne(context.Background(), bson.D{{Key: fSessionID, Value: id}}).Decode(&m)
	if err == mongodrv.ErrNoDocuments {
		return nil
	}
	require.NoError(r.t, err)
	return m
}

// messages returns the message documents of id, oldest first.
func (r raw) messageDocs(id string) []bson.M {
	r.t.Helper()
	cur, err := r.messages.Find(context.Background(), bson.D{{Key: fSessionID, Value: id}},
		options.Find().SetSort(bson.D{{Key: fMsgSeq, Value: 1}}))
	require.NoError(r.t, err)
	var out []bson.M
	require.NoError(r.t, cur.All(context.Background(), &out))
	return out
}

// insert stores documents as another writer (the Python SDK) would.
func (r raw) insert(coll *mongodrv.Collection, docs ...any) {
	r.t.Helper()
	_, err := coll.InsertMany(context.Background(), docs)
	require.NoError(r.t, err)
}

// pythonRead reads a session the way the Python SDK's MongoDBSession does:
// the current generation from the session document, then that
// generation's documents by seq, flattening message_data and parsing each
// string with json.loads.
func (r raw) pythonRead(id string) []string {
	r.t.Helper()
	sd := r.session(id)
	if sd == nil {
		return nil
	}
	gen, _ := sd[fGeneration].(int64)
	var out []string
	for _, d := range r.messageDocs(id) {
		g, _ := d[fMsgGeneration].(int64)
		if g != gen {
			continue
		}
		switch md := d[fMessageData].(type) {
		case bson.A:
			for _, e := range md {
				s := e.(string)
				require.True(r.t, json.Valid([]byte(s)))
				out = append(out, s)
			}
		case string:
			out = append(out, md)
		}
	}
	return out
}

func TestLayoutIsPythons(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	s := mustSession(t, st, "py")
	a, b := numbered("a", 2), numbered("b", 3)
	require.NoError(t, s.AddItems(ctx, a))
	require.NoError(t, s.AddItems(ctx, b))

	sd := r.session("py")
	require.Equal(t, "py", sd[fSessionID])
	require.EqualValues(t, 5, sd[fSeq], "_seq counts every item reserved")
	require.EqualValues(t, 0, sd[fGeneration])
	require.IsType(t, bson.DateTime(0), sd[fCreatedAt])
	require.IsType(t, bson.DateTime(0), sd[fUpdatedAt])
	require.NotContains(t, sd, fExpiresAt, "no expiry without a TTL")

	docs := r.messageDocs("py")
	require.Len(t, docs, 2, "one document per batch")
	for i, want := range []struct {
		seq   int64
		items []session.Item
	}{{1, a}, {4, b}} {
		d := docs[i]
		require.Equal(t, "py", d[fSessionID])
		require.Equal(t, want.seq, d[fMsgSeq], "seq is the 0-based position of the batch's last item, as Python numbers it")
		require.Equal(t, int64(0), d[fMsgGeneration])
		require.IsType(t, bson.DateTime(0), d[fCreatedAt])
		var got []string
		for _, e := range d[fMessageData].(bson.A) {
			got = append(got, e.(string))
		}
		require.Equal(t, texts(want.items), got, "items are stored as their exact JSON text")
	}
	require.Equal(t, texts(append(a, b...)), r.pythonRead("py"), "the Python SDK reads what we wrote")

	idx := map[string]bson.M{}
	cur, err := st.messages.Indexes().List(ctx)
	require.NoError(t, err)
	var specs []bson.M
	require.NoError(t, cur.All(ctx, &specs))
	for _, sp := range specs {
		idx[sp["name"].(string)] = sp
	}
	require.Contains(t, idx, "session_id_1_seq_1")
	require.Contains(t, idx, "session_id_1_generation_1_seq_1")
	for name, sp := range idx {
		u, _ := sp["unique"].(bool)
		require.False(t, u, "index %s of the messages is not unique: no Python write may fail on it", name)
	}
	cur, err = st.sessions.Indexes().List(ctx)
	require.NoError(t, err)
	specs = nil
	require.NoError(t, cur.All(ctx, &specs))
	var unique bool
	for _, sp := range specs {
		if sp["name"] == "session_id_1" {
			unique, _ = sp["unique"].(bool)
		}
	}
	require.True(t, unique, "session_id is unique on the sessions collection")
}

// TestPythonWrittenDocuments reads and pops what the Python SDK writes:
// legacy per-item documents (message_data a string, no generation, int32
// seq) from its older releases, and batch documents from its newer ones.
func TestPythonWrittenDocuments(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	now := time.Now()
	legacy := []string{`{"role":"user","content":"l0"}`, `{"role":"assistant","content":"l1"}`, `{"role":"user","content":"l2"}`}
	batch := []string{`{"type":"message","content":"b0"}`, `{"type":"message","content":"b1"}`}
	r.insert(st.sessions, bson.D{
		{Key: fSessionID, Value: "legacy"}, {Key: fCreatedAt, Value: now}, {Key: fUpdatedAt, Value: now},
		{Key: fSeq, Value: int32(5)},
	})
	r.insert(st.messages,
		bson.D{{Key: fSessionID, Value: "legacy"}, {Key: fMsgSeq, Value: int32(0)}, {Key: fMessageData, Value: legacy[0]}},
		bson.D{{Key: fSessionID, Value: "legacy"}, {Key: fMsgSeq, Value: int32(1)}, {Key: fMessageData, Value: legacy[1]}},
		bson.D{{Key: fSessionID, Value: "legacy"}, {Key: fMsgSeq, Value: int32(2)}, {Key: fMessageData, Value: legacy[2]}},
		bson.D{{Key: fSessionID, Value: "legacy"}, {Key: fMsgSeq, Value: int32(4)}, {Key: fMsgGeneration, Value: int32(0)},
			{Key: fMessageData, Value: bson.A{batch[0], batch[1]}}, {Key: fCreatedAt, Value: now}},
	)
	s := mustSession(t, st, "legacy")
	all := append(append([]string{}, legacy...), batch...)

	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, all, texts(got))
	for n := 1; n <= 6; n++ {
		got, err := s.LatestItems(ctx, n)
		require.NoError(t, err)
		require.Equal(t, all[max(0, len(all)-n):], texts(got), "latest %d", n)
	}

	require.NoError(t, s.AddItems(ctx, numbered("new", 2)))
	docs := r.messageDocs("legacy")
	require.Equal(t, int64(6), docs[len(docs)-1][fMsgSeq], "new batches continue the Python counter")

	for i := range 2 {
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, numbered("new", 2)[1-i].String(), it.String())
	}
	for i := len(all) - 1; i >= 0; i-- {
		it, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, all[i], it.String(), "pop %d", i)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, all[:i], texts(got))
	}
	_, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	for _, d := range r.messageDocs("legacy") {
		require.IsType(t, bson.A{}, d[fMessageData], "popped legacy documents are deleted; batches stay as empty markers")
		require.Empty(t, d[fMessageData])
	}
}

func TestClearBumpsTheGenerationAndCollects(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	s := mustSession(t, st, "clear")
	other := mustSession(t, st, "clear-other")
	for range 3 {
		require.NoError(t, s.AddItems(ctx, numbered("old", 2)))
	}
	require.NoError(t, other.AddItems(ctx, numbered("keep", 1)))
	require.NoError(t, s.Clear(ctx))

	sd := r.session("clear")
	require.EqualValues(t, 1, sd[fGeneration], "clear adds one to the generation")
	require.EqualValues(t, 7, sd[fSeq], "and reserves one seq, for its marker")
	docs := r.messageDocs("clear")
	require.Len(t, docs, 1, "older documents are deleted")
	require.EqualValues(t, 6, docs[0][fMsgSeq], "the marker sits at the seq it reserved")
	require.EqualValues(t, 1, docs[0][fMsgGeneration])
	require.Empty(t, docs[0][fMessageData], "the marker holds no item")
	require.Nil(t, r.pythonRead("clear"))
	require.Len(t, r.messageDocs("clear-other"), 1, "clear touches no other session")

	require.NoError(t, s.AddItems(ctx, numbered("new", 2)))
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("new", 2)), texts(got))
	require.Equal(t, texts(numbered("new", 2)), r.pythonRead("clear"))
}

func TestReplaceLayout(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	s := mustSession(t, st, "replace")
	require.NoError(t, s.AddItems(ctx, numbered("old", 3)))
	require.NoError(t, s.ReplaceItems(ctx, numbered("new", 2)))

	sd := r.session("replace")
	gen := sd[fGeneration].(int64)
	require.GreaterOrEqual(t, gen, int64(1)<<40, "a replace installs a random generation")
	require.Equal(t, gen, sd[fBaseGeneration])
	docs := r.messageDocs("replace")
	require.Len(t, docs, 2, "the replacement batch and the marker; the old batch is deleted")
	require.Equal(t, sd[fBaseSeq], docs[0][fMsgSeq])
	require.Equal(t, gen, docs[0][fMsgGeneration])
	require.Len(t, docs[0][fMessageData], 2)
	require.Equal(t, sd[fSeq].(int64)-1, docs[1][fMsgSeq])
	require.Empty(t, docs[1][fMessageData])
	require.Equal(t, texts(numbered("new", 2)), r.pythonRead("replace"))
}

func TestReplaceThatLosesItsSwitch(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	s := mustSession(t, st, "race")
	other := mustSession(t, st, "race")
	require.NoError(t, s.AddItems(ctx, numbered("old", 3)))

	t.Run("a lost switch deletes its batch and tries again", func(t *testing.T) {
		losses := 1
		testHookBeforeSwitch = func(*Session) {
			if losses > 0 {
				losses--
				require.NoError(t, other.AddItems(ctx, numbered("racer", 1)))
				require.NoError(t, other.Clear(ctx))
			}
		}
		defer func() { testHookBeforeSwitch = nil }()
		require.NoError(t, s.ReplaceItems(ctx, numbered("new", 2)))
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("new", 2)), texts(got))
		require.Len(t, r.messageDocs("race"), 2, "the losing attempt's batch is gone")
	})

	t.Run("a switch cut short by cancellation changes nothing", func(t *testing.T) {
		require.NoError(t, s.ReplaceItems(ctx, numbered("before", 2)))
		cctx, cancel := context.WithCancel(ctx)
		testHookBeforeSwitch = func(*Session) { cancel() }
		defer func() { testHookBeforeSwitch = nil }()
		err := s.ReplaceItems(cctx, numbered("cut", 2))
		require.ErrorIs(t, err, context.Canceled)
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered("before", 2)), texts(got))
		require.Len(t, r.messageDocs("race"), 2, "the cut attempt's batch is gone (the replacement and its marker remain)")
	})

	t.Run("always losing fails and leaves no trace", func(t *testing.T) {
		testHookBeforeSwitch = func(*Session) { require.NoError(t, other.Clear(ctx)) }
		defer func() { testHookBeforeSwitch = nil }()
		err := s.ReplaceItems(ctx, numbered("lost", 2))
		require.Error(t, err)
		require.Contains(t, err.Error(), "lost")
		got, err := s.Items(ctx)
		require.NoError(t, err)
		require.Empty(t, got, "only the concurrent clears took effect")
		for _, d := range r.messageDocs("race") {
			require.Empty(t, d[fMessageData], "no batch of a losing attempt remains")
		}
	})
}

// TestHostileIDsStayValues: an id is only ever a value in a filter, never
// a key or an operator.
func TestHostileIDsStayValues(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	ids := []string{"$where", `{"$ne":null}`, "$gt", "a.b", "$", "$$ROOT", "this.x == 1", `{"$regex":".*"}`, "\x00", strings.Repeat("$", 300)}
	for i, id := range ids {
		require.NoError(t, mustSession(t, st, id).AddItems(ctx, numbered(fmt.Sprint("id", i), i+1)))
	}
	for i, id := range ids {
		got, err := mustSession(t, st, id).Items(ctx)
		require.NoError(t, err)
		require.Equal(t, texts(numbered(fmt.Sprint("id", i), i+1)), texts(got), "session %q holds its own items only", id)
		sd := r.session(id)
		require.NotNil(t, sd)
		require.Equal(t, id, sd[fSessionID], "the id is stored as a plain string value")
		for _, d := range r.messageDocs(id) {
			require.Equal(t, id, d[fSessionID])
		}
	}
	n, err := st.sessions.CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	require.EqualValues(t, len(ids), n, "one session document per id, none shared")
	require.NoError(t, mustSession(t, st, "$where").Clear(ctx))
	for i, id := range ids[1:] {
		got, err := mustSession(t, st, id).Items(ctx)
		require.NoError(t, err)
		require.Len(t, got, i+2, "clearing $where touched %q", id)
	}
}

// TestExistingIndexesAndData: a database set up by an older Python release
// (a plain {session_id, seq} index), or holding documents that share a
// seq, still works.
func TestExistingIndexesAndData(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, st *Store)
	}{
		{"plain {session_id, seq} index", func(t *testing.T, st *Store) {
			_, err := st.messages.Indexes().CreateOne(ctx, mongodrv.IndexModel{
				Keys: bson.D{{Key: fSessionID, Value: 1}, {Key: fMsgSeq, Value: 1}}})
			require.NoError(t, err)
		}},
		{"a unique {session_id, seq} index of an older release", func(t *testing.T, st *Store) {
			_, err := st.messages.Indexes().CreateOne(ctx, mongodrv.IndexModel{
				Keys: bson.D{{Key: fSessionID, Value: 1}, {Key: fMsgSeq, Value: 1}}, Options: options.Index().SetUnique(true)})
			require.NoError(t, err)
		}},
		{"documents sharing a seq", func(t *testing.T, st *Store) {
			r := rawOf(t, st)
			r.insert(st.messages,
				bson.D{{Key: fSessionID, Value: "x"}, {Key: fMsgSeq, Value: int64(1)}, {Key: fMessageData, Value: `{"a":1}`}},
				bson.D{{Key: fSessionID, Value: "x"}, {Key: fMsgSeq, Value: int64(1)}, {Key: fMessageData, Value: `{"a":2}`}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newTestStore(t, Options{})
			tc.setup(t, st)
			s := mustSession(t, st, "existing")
			require.NoError(t, s.AddItems(ctx, numbered("e", 2)))
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Len(t, got, 2)
			// A Python write at a seq a document already holds succeeds.
			_, err = st.messages.InsertOne(ctx, bson.D{{Key: fSessionID, Value: "existing"}, {Key: fMsgSeq, Value: int64(1)},
				{Key: fMsgGeneration, Value: int64(0)}, {Key: fMessageData, Value: bson.A{`{"dup":1}`}}})
			require.NoError(t, err, "no index refuses a Python write")
		})
	}
}
