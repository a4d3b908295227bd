package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// queueLen returns how many writes wait in st's queue.
func queueLen(st *Store) int {
	st.w.wmu.Lock()
	defer st.w.wmu.Unlock()
	return len(st.w.queue)
}

// waitQueued waits until n writes wait in st's queue.
func waitQueued(t *testing.T, st *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for queueLen(st) < n {
		require.True(t, time.Now().Before(deadline), "only %d of %d writes queued", queueLen(st), n)
		time.Sleep(time.Millisecond)
	}
}

// groupCase queues writes behind a lock another connection holds, so that
// the writer takes them all in one transaction when the lock goes.
type groupCase struct {
	f    *fixture
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs map[string]error
}

func (g *groupCase) add(t *testing.T, name, id string, batch []session.Item) {
	g.wg.Add(1)
	s := g.f.session(t, id)
	go func() {
		defer g.wg.Done()
		err := s.AddItems(context.Background(), batch)
		g.mu.Lock()
		g.errs[name] = err
		g.mu.Unlock()
	}()
}

// TestGroupCommitFailingBatch: in one group transaction, a batch that
// fails at insert time (a trigger refuses one of its items) fails its own
// caller only; every other batch of the group commits, whole and
// contiguous, in queue order.
func TestGroupCommitFailingBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action string // what the trigger raises
	}{
		{"statement aborted", "ABORT"},          // the writer rolls the group back and runs the others again
		{"transaction rolled back", "ROLLBACK"}, // SQLite drops the whole transaction: the others run again
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			_, err := f.st.DB().ExecContext(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON agent_messages
                WHEN NEW.message_data = '{"refuse":1}' BEGIN SELECT RAISE(`+tc.action+`, 'refused by the test trigger'); END`)
			require.NoError(t, err)
			require.NoError(t, f.session(t, "a").AddItems(ctx, numbered("before", 1)))
			tx0, w0 := f.st.Stats()

			release := holdLock(t, f.path)
			g := &groupCase{f: f, errs: map[string]error{}}
			// Queue one at a time, so that the queue order is known.
			plan := []struct {
				name, id string
				batch    []session.Item
			}{
				{"a1", "a", numbered("a1", 3)},
				{"b1", "b", numbered("b1", 2)},
				{"bad", "a", items(t, `{"ok":"first"}`, `{"refuse":1}`, `{"ok":"last"}`)},
				{"a2", "a", numbered("a2", 4)},
				{"c1", "c", numbered("c1", 1)},
			}
			for i, p := range plan {
				g.add(t, p.name, p.id, p.batch)
				waitQueued(t, f.st, i+1)
			}
			release()
			g.wg.Wait()

			for _, p := range plan {
				if p.name == "bad" {
					require.ErrorContains(t, g.errs[p.name], "refused by the test trigger", "the failing batch's caller gets the failure")
					continue
				}
				require.NoError(t, g.errs[p.name], "batch %s is not concerned by another's failure", p.name)
			}
			tx1, w1 := f.st.Stats()
			require.Equal(t, int64(len(plan)-1), w1-w0, "every good batch committed")
			require.Equal(t, int64(1), tx1-tx0, "in one transaction")

			all := func(id string) []string {
				got, err := f.session(t, id).Items(ctx)
				require.NoError(t, err)
				return texts(got)
			}
			want := texts(numbered("before", 1))
			want = append(want, texts(numbered("a1", 3))...)
			want = append(want, texts(numbered("a2", 4))...)
			require.Equal(t, want, all("a"), "nothing of the failed batch, the others whole and in order")
			require.Equal(t, texts(numbered("b1", 2)), all("b"))
			require.Equal(t, texts(numbered("c1", 1)), all("c"))
		})
	}
}

// TestGroupCommitMixed runs every kind of write in one group, a pop over
// an unreadable newest row among them: the pop's undo (rollback to its
// savepoint) touches nothing of the others.
func TestGroupCommitMixed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	p, r, c := f.session(t, "pop"), f.session(t, "replace"), f.session(t, "clear")
	require.NoError(t, p.AddItems(ctx, numbered("p", 2)))
	require.NoError(t, insertRaw(ctx, f.st, "pop", []byte("unreadable")))
	require.NoError(t, r.AddItems(ctx, numbered("r", 3)))
	require.NoError(t, c.AddItems(ctx, numbered("c", 3)))
	tx0, _ := f.st.Stats()

	release := holdLock(t, f.path)
	var wg sync.WaitGroup
	var popped session.Item
	var popOK bool
	var errs [4]error
	run := func(i int, fn func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
		waitQueued(t, f.st, i+1)
	}
	run(0, func() error { return f.session(t, "add").AddItems(ctx, numbered("x", 2)) })
	run(1, func() (err error) { popped, popOK, err = p.PopItem(ctx); return err })
	run(2, func() error { return r.ReplaceItems(ctx, numbered("new", 1)) })
	run(3, func() error { return c.Clear(ctx) })
	release()
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "write %d", i)
	}
	tx1, _ := f.st.Stats()
	require.Equal(t, int64(1), tx1-tx0, "one transaction")
	require.True(t, popOK)
	require.Equal(t, numbered("p", 2)[1].String(), popped.String())
	require.Equal(t, []string{numbered("p", 2)[0].String(), "unreadable"}, rawRows(t, f.st, "pop"))
	require.Equal(t, texts(numbered("new", 1)), rawRows(t, f.st, "replace"))
	require.Empty(t, rawRows(t, f.st, "clear"))
	require.Equal(t, texts(numbered("x", 2)), rawRows(t, f.st, "add"))
}

// TestGroupCommitWithdraw: a write whose context ends while it waits in
// the queue is never written, and the others are.
func TestGroupCommitWithdraw(t *testing.T) {
	f := newFixture(t)
	release := holdLock(t, f.path)
	var wg sync.WaitGroup
	var keepErr, goneErr error
	wg.Add(2)
	go func() { defer wg.Done(); keepErr = f.session(t, "k").AddItems(context.Background(), numbered("k", 1)) }()
	waitQueued(t, f.st, 1)
	cctx, cancel := context.WithCancel(context.Background())
	go func() { defer wg.Done(); goneErr = f.session(t, "g").AddItems(cctx, numbered("g", 1)) }()
	waitQueued(t, f.st, 2)
	cancel()
	for queueLen(f.st) != 1 {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	require.NoError(t, keepErr)
	require.ErrorIs(t, goneErr, context.Canceled)
	require.Equal(t, texts(numbered("k", 1)), rawRows(t, f.st, "k"))
	require.Empty(t, rawRows(t, f.st, "g"), "a withdrawn write is never written")
}

// TestGroupCommitGroups: writers of one Store share transactions, and none
// of them ever sees SQLITE_BUSY.
func TestGroupCommitGroups(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	const writers, batches = 16, 30
	tx0, n0 := f.st.Stats()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := f.session(t, fmt.Sprintf("w%d", w%4))
			for b := range batches {
				if err := s.AddItems(ctx, numbered(fmt.Sprintf("w%d.%d", w, b), 3)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tx, n := f.st.Stats()
	tx, n = tx-tx0, n-n0
	require.Equal(t, int64(writers*batches), n)
	require.Less(t, tx, n, "concurrent writes share transactions")
	t.Logf("%d writes in %d transactions", n, tx)
}

// TestGroupCommitFailingPop: a write that runs in a savepoint of its own
// (PopItem, which may have to undo its delete) and fails is rolled back to
// its savepoint; the others of the group commit in the same transaction.
func TestGroupCommitFailingPop(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	locked := f.session(t, "locked")
	require.NoError(t, locked.AddItems(ctx, numbered("l", 2)))
	_, err := f.st.DB().ExecContext(ctx, `CREATE TRIGGER keep BEFORE DELETE ON agent_messages
        WHEN OLD.session_id = 'locked' BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END`)
	require.NoError(t, err)
	tx0, w0 := f.st.Stats()

	release := holdLock(t, f.path)
	var wg sync.WaitGroup
	var errs [3]error
	run := func(i int, fn func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
		waitQueued(t, f.st, i+1)
	}
	run(0, func() error { return f.session(t, "a").AddItems(ctx, numbered("a", 2)) })
	run(1, func() error { _, _, err := locked.PopItem(ctx); return err })
	run(2, func() error { return f.session(t, "b").AddItems(ctx, numbered("b", 1)) })
	release()
	wg.Wait()
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "refused by the test trigger")
	require.NoError(t, errs[2])
	tx1, w1 := f.st.Stats()
	require.Equal(t, int64(1), tx1-tx0, "one transaction: the failed pop was undone alone")
	require.Equal(t, int64(2), w1-w0)
	require.Equal(t, texts(numbered("l", 2)), rawRows(t, f.st, "locked"))
	require.Equal(t, texts(numbered("a", 2)), rawRows(t, f.st, "a"))
	require.Equal(t, texts(numbered("b", 1)), rawRows(t, f.st, "b"))
}
