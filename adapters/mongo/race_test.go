package mongo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
)

// roundItem is item i of round r.
func roundItem(r, i int) session.Item {
	return session.MustItem(fmt.Sprintf(`{"r":%d,"i":%d}`, r, i))
}

// parseRound returns an item's round and index.
func parseRound(it session.Item) (r, i int, err error) {
	_, err = fmt.Sscanf(it.String(), `{"r":%d,"i":%d}`, &r, &i)
	return r, i, err
}

// checkPrefix reports whether items are items [0, len) of one round, with
// a length in lengths. It uses assert, not require: readers run in their
// own goroutines.
func checkPrefix(t *testing.T, items []session.Item, lengths []int, what string) bool {
	t.Helper()
	if len(items) == 0 {
		return true
	}
	if !assert.Contains(t, lengths, len(items), "%s: %d items is no state the writer ever made", what, len(items)) {
		return false
	}
	return checkRun(t, items, 0, what)
}

// checkRun reports whether items are items [first, first+len) of one round.
func checkRun(t *testing.T, items []session.Item, first int, what string) bool {
	t.Helper()
	r0, _, err := parseRound(items[0])
	if !assert.NoError(t, err) {
		return false
	}
	for k, it := range items {
		r, i, err := parseRound(it)
		if !assert.NoError(t, err) ||
			!assert.Equal(t, [2]int{r0, first + k}, [2]int{r, i}, "%s: item %d does not belong (a partial or mixed history)", what, k) {
			return false
		}
	}
	return true
}

// checkTail reports whether items are the last len(items) of a prefix of
// one round whose length is in lengths, as a latest-n read must be.
func checkTail(t *testing.T, items []session.Item, n int, lengths []int, what string) bool {
	t.Helper()
	if len(items) == 0 {
		return true
	}
	_, first, err := parseRound(items[0])
	if !assert.NoError(t, err) {
		return false
	}
	end := first + len(items)
	return assert.Contains(t, lengths, end, "%s: a window ending at %d is no state the writer ever made", what, end) &&
		assert.True(t, len(items) == n || first == 0, "%s: %d items, not %d, yet not from the start", what, len(items), n) &&
		checkRun(t, items, first, what)
}

// TestReadsNeverSeeAPartialClear has one writer clear the session and
// rebuild it batch by batch, round after round, while readers on another
// client read it. Every read must be a state the writer made: empty, or
// the first k batches of one round. A read that overlapped a clear's
// garbage collection without noticing would return a partial history.
func TestReadsNeverSeeAPartialClear(t *testing.T) {
	ctx := context.Background()
	db := uniqueDB(t)
	writerClient, readerClient := newClient(t, nil), newClient(t, nil)
	dropOnCleanup(t, writerClient, db)
	wst, err := New(writerClient, Options{Database: db})
	require.NoError(t, err)
	rst, err := New(readerClient, Options{Database: db})
	require.NoError(t, err)
	w := mustSession(t, wst, "partial")

	const rounds, batches, size = 15, 5, 4
	lengths := []int{}
	for k := 1; k <= batches; k++ {
		lengths = append(lengths, k*size)
	}
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mustSession(t, rst, "partial")
			for !done.Load() {
				all, err := r.Items(ctx)
				if !assertNoError(t, err) {
					return
				}
				n := 6
				latest, err := r.LatestItems(ctx, n)
				if !assertNoError(t, err) ||
					!checkPrefix(t, all, lengths, fmt.Sprintf("reader %d items", g)) ||
					!checkTail(t, latest, n, lengths, fmt.Sprintf("reader %d latest", g)) {
					return
				}
				reads.Add(1)
			}
		}()
	}
	for round := range rounds {
		require.NoError(t, w.Clear(ctx))
		for b := range batches {
			batch := make([]session.Item, size)
			for i := range batch {
				batch[i] = roundItem(round, b*size+i)
			}
			require.NoError(t, w.AddItems(ctx, batch))
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d consistent reads during %d clears", reads.Load(), rounds)
}

// TestReadsNeverSeeAPartialReplace: the same with replaces (a replace then
// two appends per round): every read is the round's replacement followed
// by 0, 1 or 2 of its appended batches.
func TestReadsNeverSeeAPartialReplace(t *testing.T) {
	ctx := context.Background()
	db := uniqueDB(t)
	writerClient, readerClient := newClient(t, nil), newClient(t, nil)
	dropOnCleanup(t, writerClient, db)
	wst, err := New(writerClient, Options{Database: db})
	require.NoError(t, err)
	rst, err := New(readerClient, Options{Database: db})
	require.NoError(t, err)
	w := mustSession(t, wst, "replace")
	require.NoError(t, w.AddItems(ctx, []session.Item{roundItem(-1, 0)}))

	const rounds, base, extra = 15, 6, 2
	lengths := []int{base, base + extra, base + 2*extra, 1}
	var done atomic.Bool
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mustSession(t, rst, "replace")
			for !done.Load() {
				all, err := r.Items(ctx)
				if !assertNoError(t, err) {
					return
				}
				latest, err := r.LatestItems(ctx, 3)
				if !assertNoError(t, err) ||
					!assert.NotEmpty(t, all, "a replaced session is never empty") ||
					!checkPrefix(t, all, lengths, fmt.Sprintf("reader %d items", g)) ||
					!checkTail(t, latest, 3, lengths, fmt.Sprintf("reader %d latest", g)) {
					return
				}
			}
		}()
	}
	for round := range rounds {
		items := make([]session.Item, base+2*extra)
		for i := range items {
			items[i] = roundItem(round, i)
		}
		require.NoError(t, w.ReplaceItems(ctx, items[:base]))
		require.NoError(t, w.AddItems(ctx, items[base:base+extra]))
		require.NoError(t, w.AddItems(ctx, items[base+extra:]))
	}
	done.Store(true)
	wg.Wait()
	got, err := w.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, base+2*extra)
}

// assertNoError reports err without stopping the goroutine's test.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("read failed: %v", err)
		return false
	}
	return true
}

// TestConsistencyChecks exercises the two checks a read makes on what it
// fetched, on hand-made documents.
func TestConsistencyChecks(t *testing.T) {
	doc := func(seq, gen int64) messageDoc {
		return messageDoc{seq: seq, hasSeq: true, gen: gen, genOK: true}
	}
	base := int64(9)
	replaced := &sessionDoc{Seq: 12, Generation: 1 << 41, BaseGeneration: ptr(int64(1 << 41)), BaseSeq: base}
	tests := []struct {
		name     string
		docs     []messageDoc
		sd       *sessionDoc
		w        int
		later    bool
		baseGone bool
	}{
		{"same generation", []messageDoc{doc(12, 3), doc(8, 3)}, &sessionDoc{Seq: 12, Generation: 3}, 5, false, false},
		{"a newer document of the same generation (append in flight)", []messageDoc{doc(14, 3), doc(12, 3)}, &sessionDoc{Seq: 12, Generation: 3}, 5, false, false},
		{"an older document of another generation (dead, not collected)", []messageDoc{doc(12, 3), doc(8, 2)}, &sessionDoc{Seq: 12, Generation: 3}, 5, false, false},
		{"a newer document of another generation (a transition began)", []messageDoc{doc(13, 4), doc(12, 3)}, &sessionDoc{Seq: 12, Generation: 3}, 5, true, false},
		{"legacy documents are generation 0", []messageDoc{{seq: 14, hasSeq: true, genOK: true}}, &sessionDoc{Seq: 12}, 5, false, false},
		{"the replace's batch is there", []messageDoc{doc(12, 1<<41), doc(9, 1<<41), doc(7, 2)}, replaced, 5, false, false},
		{"the replace's batch is missing (read before it)", []messageDoc{doc(7, 2), doc(6, 2)}, replaced, 5, false, true},
		{"the window stops above the replace's batch", []messageDoc{doc(12, 1<<41), doc(11, 2)}, replaced, 2, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.later, laterGeneration(tc.docs, tc.sd))
			require.Equal(t, tc.baseGone, baseMissing(tc.docs, tc.sd, tc.w))
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestEstimatorWindow: a latest-n read asks for about n/avg documents.
func TestEstimatorWindow(t *testing.T) {
	var e estimator
	require.Equal(t, 51, e.window(50), "no observation: one document per item, plus one")
	for range 20 {
		e.observe(20, 1)
	}
	require.Equal(t, 5, e.window(50))
	require.Equal(t, 2, e.window(1))
	e.observe(0, 0)
	require.Equal(t, 5, e.window(50), "empty observations change nothing")
}

// setBetweenReads arms the read hook for the next fetch.
func setBetweenReads(messagesFirst bool, hook func()) {
	testBetweenReadsMu.Lock()
	defer testBetweenReadsMu.Unlock()
	testBetweenReads = &betweenReads{messagesFirst: messagesFirst, hook: hook}
}

// TestReadOverlappingTheWorstMoments places a clear or a replace exactly
// between a read's two fetches, in the two orders the concurrent fetches
// can take, and with the clear's garbage collection caught half done.
func TestReadOverlappingTheWorstMoments(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	r := rawOf(t, st)
	old := make([]session.Item, 0, 10)
	for i := range 10 {
		old = append(old, roundItem(0, i))
	}
	setup := func(t *testing.T, id string) *Session {
		s := mustSession(t, st, id)
		for b := range 5 {
			require.NoError(t, s.AddItems(ctx, old[2*b:2*b+2]))
		}
		return s
	}

	t.Run("session read, then a clear whose collection is half done, then messages", func(t *testing.T) {
		s := setup(t, "half-clear")
		for _, n := range []int{-1, 3} {
			require.NoError(t, s.Clear(ctx))
			for b := range 5 {
				require.NoError(t, s.AddItems(ctx, old[2*b:2*b+2]))
			}
			setBetweenReads(false, func() {
				// A clear's commit and marker, then the deletion of only
				// the two newest old documents, as a collection in
				// progress on MongoDB may leave it.
				var sd sessionDoc
				require.NoError(t, st.sessions.FindOneAndUpdate(ctx, bson.D{byID("half-clear")},
					bson.D{{Key: "$inc", Value: bson.D{{Key: fGeneration, Value: int64(1)}, {Key: fSeq, Value: int64(1)}}}},
					options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&sd))
				require.NoError(t, s.insertBatch(ctx, &sd, sd.Generation, nil, time.Now()))
				docs := r.messageDocs("half-clear")
				for _, d := range docs[len(docs)-3 : len(docs)-1] {
					_, err := st.messages.DeleteOne(ctx, bson.D{{Key: "_id", Value: d["_id"]}})
					require.NoError(t, err)
				}
			})
			var got []session.Item
			var err error
			if n < 0 {
				got, err = s.Items(ctx)
			} else {
				got, err = s.LatestItems(ctx, n)
			}
			require.NoError(t, err)
			require.Empty(t, texts(got), "the read must notice the clear, not return what its collection left")
		}
	})

	t.Run("messages read, then a replace, then the session read", func(t *testing.T) {
		s := setup(t, "replace-between")
		other := mustSession(t, st, "replace-between")
		repl := []session.Item{roundItem(1, 0), roundItem(1, 1), roundItem(1, 2)}
		for _, n := range []int{-1, 2} {
			setBetweenReads(true, func() { require.NoError(t, other.ReplaceItems(ctx, repl)) })
			var got []session.Item
			var err error
			if n < 0 {
				got, err = s.Items(ctx)
				require.NoError(t, err)
				require.Equal(t, texts(repl), texts(got))
			} else {
				got, err = s.LatestItems(ctx, n)
				require.NoError(t, err)
				require.Equal(t, texts(repl[1:]), texts(got))
			}
		}
	})
}
