package mongo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/session"
)

// TestReservationOrderIsReadOrder places a whole append b between the
// reservation and the insert of an append a, and a read after b: the read
// shows [x0 b], so a must not land below b afterwards. Before the commit
// step, a's batch, holding the lower seq, was inserted below b and a later
// read returned [x0 a b]: an item appearing below one already read as the
// newest.
func TestReservationOrderIsReadOrder(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "order")
	other := mustSession(t, peerStore(t, st), "order") // another process
	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"v":"x0"}`)}))

	var seenBetween []string
	var once sync.Once
	testHookAfterReserve = func(h *Session, seq int64) {
		if h != s {
			return
		}
		once.Do(func() {
			require.NoError(t, other.AddItems(ctx, []session.Item{session.MustItem(`{"v":"b"}`)}))
			got, err := other.Items(ctx)
			require.NoError(t, err)
			seenBetween = texts(got)
		})
	}
	t.Cleanup(func() { testHookAfterReserve = nil })

	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"v":"a"}`)}))
	testHookAfterReserve = nil
	require.Equal(t, []string{`{"v":"x0"}`, `{"v":"b"}`}, seenBetween, "b is acknowledged and read while a is reserved, not inserted")
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"v":"x0"}`, `{"v":"b"}`, `{"v":"a"}`}, texts(got), "a lands above what was read, never below b")
	latest, err := other.LatestItems(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []string{`{"v":"a"}`}, texts(latest))
}

// peerStore returns another Store, on its own client, on st's database:
// another process.
func peerStore(t *testing.T, st *Store) *Store {
	t.Helper()
	peer, err := New(newClient(t, nil), Options{Database: st.opts.Database})
	require.NoError(t, err)
	return peer
}

// TestWriterDiedBeforeCommit: a writer that dies between its insert and
// its commit leaves a batch that no reader ever shows (it was never
// acknowledged), and blocks no one: the next append waits for it at most
// staleReservation (here not at all: it is older than that), and abandons
// it once it is older than deadReservation.
func TestWriterDiedBeforeCommit(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	s := mustSession(t, st, "crash")
	require.NoError(t, s.AddItems(ctx, numbered("a", 1)))

	dead := bson.NewObjectID()
	sd, now, err := s.reserveAs(ctx, 1, dead)
	require.NoError(t, err)
	raw, err := batchDoc{id: dead, session: s.id, seq: sd.batchSeq(), gen: sd.Generation, items: numbered("dead", 1), created: now, commit: 1}.marshal()
	require.NoError(t, err)
	_, err = st.messages.InsertOne(ctx, raw)
	require.NoError(t, err)
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(numbered("a", 1)), texts(got), "inserted, not committed: hidden")

	// The writer died a minute ago.
	_, err = st.sessions.UpdateOne(ctx, bson.D{byID(s.id)},
		bson.D{{Key: "$set", Value: bson.D{{Key: fResv + "." + dead.Hex(), Value: now.Add(-time.Minute)}}}})
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, s.AddItems(ctx, numbered("c", 1)))
	require.Less(t, time.Since(start), staleReservation, "a dead reservation does not hold up the next append")
	want := append(texts(numbered("a", 1)), texts(numbered("c", 1))...)
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, want, texts(got))
	r := rawOf(t, st).session("crash")
	require.Contains(t, fmt.Sprint(r[fAbandoned]), dead.Hex(), "the dead reservation was abandoned")

	// The writer was only slow: its commit now fails, and it would reserve
	// again; its batch stays hidden.
	ok, err := s.commitBatch(ctx, sd, dead, nil, nil, nil)
	require.NoError(t, err)
	require.False(t, ok, "an abandoned reservation cannot commit")
	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, texts(numbered("c", 1)), texts([]session.Item{it}))
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, want[:1], texts(got), "still nothing of the dead writer's")
}

// TestConcurrentMixed runs 8 goroutines appending, reading, popping and
// clearing one session and checks that no item is popped twice and that
// every item acknowledged after the clear is accounted for: still in the
// history at the end or popped exactly once.
func TestConcurrentMixed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := newTestStore(t, Options{})
	stores := []*Store{st, peerStore(t, st)}
	const workers, ops = 8, 12
	var (
		mu      sync.Mutex
		acked   = map[string]time.Time{} // item -> when its append began
		popped  = map[string]int{}
		clearAt time.Time // when the clear returned
		readErr []string
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s := mustSession(t, stores[w%2], "mixed") // two processes
			for i := range ops {
				switch (w + i) % 6 {
				case 0, 1:
					tag := fmt.Sprintf("w%d-%d", w, i)
					items := numbered(tag, 1+i%2)
					began := time.Now()
					if err := s.AddItems(ctx, items); err != nil {
						t.Errorf("append: %v", err)
						return
					}
					mu.Lock()
					for _, x := range texts(items) {
						acked[x] = began
					}
					mu.Unlock()
				case 2:
					got, err := s.Items(ctx)
					if err != nil {
						t.Errorf("items: %v", err)
						return
					}
					seen := map[string]bool{}
					for _, x := range texts(got) {
						if seen[x] {
							mu.Lock()
							readErr = append(readErr, "duplicate "+x)
							mu.Unlock()
						}
						seen[x] = true
					}
				case 3:
					if _, err := s.LatestItems(ctx, 3); err != nil {
						t.Errorf("latest: %v", err)
						return
					}
				case 4:
					it, ok, err := s.PopItem(ctx)
					if err != nil {
						t.Errorf("pop: %v", err)
						return
					}
					if ok {
						mu.Lock()
						popped[it.String()]++
						mu.Unlock()
					}
				case 5:
					if w == 0 && i == 5 {
						if err := s.Clear(ctx); err != nil {
							t.Errorf("clear: %v", err)
							return
						}
						mu.Lock()
						clearAt = time.Now()
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, readErr)
	for x, n := range popped {
		require.Equal(t, 1, n, "item %s popped %d times", x, n)
		_, ok := acked[x]
		require.True(t, ok, "popped item %s was appended", x)
	}
	final, err := mustSession(t, st, "mixed").Items(ctx)
	require.NoError(t, err)
	left := map[string]bool{}
	for _, x := range texts(final) {
		require.False(t, left[x], "item %s twice in the history", x)
		require.Zero(t, popped[x], "item %s both popped and still there", x)
		left[x] = true
	}
	kept := 0
	for x, began := range acked {
		if !clearAt.IsZero() && !began.After(clearAt) {
			continue // appended before or during the clear: either is right
		}
		kept++
		require.True(t, left[x] || popped[x] == 1, "acknowledged item %s, appended after the clear, lost", x)
	}
	t.Logf("%d acknowledged (%d after the clear), %d popped, %d left", len(acked), kept, len(popped), len(final))
}
