package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		time.Sleep(2 * time.Millisecond)
	}
}

// lockWaiters counts the backends waiting on a lock in a statement on st's
// tables.
func lockWaiters(t *testing.T, st *Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, quote(st.opts.Schema)).Scan(&n))
	return n
}

// op is one call as a linearizability check sees it.
type op struct {
	kind       string // "pop", "append", "read"
	start, end time.Time
	item       string   // pop: the item returned; append: the item added
	view       []string // read: what it returned
}

// linearizable reports whether some order of ops that respects real time
// (a before b when a ended before b started), run from history start,
// gives every op its result and ends in final.
func linearizable(start []string, ops []op, final []string) bool {
	idx := make([]int, len(ops))
	for i := range idx {
		idx[i] = i
	}
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(idx) {
			h := slices.Clone(start)
			for _, i := range idx {
				o := ops[i]
				switch o.kind {
				case "pop":
					if len(h) == 0 || h[len(h)-1] != o.item {
						return false
					}
					h = h[:len(h)-1]
				case "append":
					h = append(h, o.item)
				case "read":
					if !slices.Equal(h, o.view) {
						return false
					}
				}
			}
			for a := range idx {
				for b := a + 1; b < len(idx); b++ {
					if ops[idx[b]].end.Before(ops[idx[a]].start) {
						return false
					}
				}
			}
			return slices.Equal(h, final)
		}
		for i := k; i < len(idx); i++ {
			idx[k], idx[i] = idx[i], idx[k]
			if try(k + 1) {
				return true
			}
			idx[k], idx[i] = idx[i], idx[k]
		}
		return false
	}
	return try(0)
}

// TestPopLinearizable: a pop that waits on the newest row's lock while an
// append commits must still pop the newest item when it takes effect.
// Another transaction holds b's row lock; the pop starts and waits; an
// append of c starts; a read runs; the lock is released. Before the pop
// took the session row's lock first, the append committed at once, the
// read saw [a b c] (so the pop, still pending, took effect after it), and
// the pop then deleted b, which its statement's snapshot, older than the
// append, had picked: [a c], no order explains it.
func TestPopLinearizable(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	s, err := st.Session("linear")
	require.NoError(t, err)
	a, b, c := `{"n":"a"}`, `{"n":"b"}`, `{"n":"c"}`
	require.NoError(t, s.AddItems(ctx, []session.Item{item(a)}))
	require.NoError(t, s.AddItems(ctx, []session.Item{item(b)}))
	var bid int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT max(id) FROM `+st.q.messages).Scan(&bid))

	holder := connect(t)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM `+st.q.messages+` WHERE id = $1 FOR UPDATE`, bid)
	require.NoError(t, err)

	var ops [3]op
	popDone, appendDone := make(chan error, 1), make(chan error, 1)
	ops[0] = op{kind: "pop", start: time.Now()}
	go func() {
		it, ok, err := s.PopItem(ctx)
		ops[0].end, ops[0].item = time.Now(), it.String()
		if err == nil && !ok {
			err = fmt.Errorf("the pop found nothing")
		}
		popDone <- err
	}()
	waitFor(t, "the pop to wait on the row lock", func() bool { return lockWaiters(t, st) == 1 })
	ops[1] = op{kind: "append", start: time.Now(), item: c}
	go func() {
		err := s.AddItems(ctx, []session.Item{item(c)})
		ops[1].end = time.Now()
		appendDone <- err
	}()
	appended := false
	waitFor(t, "the append to commit or wait", func() bool {
		select {
		case err := <-appendDone:
			require.NoError(t, err)
			appended = true
			return true
		default:
			return lockWaiters(t, st) == 2
		}
	})
	ops[2] = op{kind: "read", start: time.Now()}
	got, err := s.Items(ctx)
	require.NoError(t, err)
	ops[2].end, ops[2].view = time.Now(), strs(got)

	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-popDone)
	if !appended {
		require.NoError(t, <-appendDone)
	}
	final, err := s.Items(ctx)
	require.NoError(t, err)
	t.Logf("append committed while the pop waited: %v; read %v; popped %s; final %v", appended, ops[2].view, ops[0].item, strs(final))
	require.True(t, linearizable([]string{a, b}, ops[:], strs(final)),
		"no order of pop (popped %s), append of c and read (saw %v) gives the final %v", ops[0].item, ops[2].view, strs(final))
}

// mixItem is an item of TestMixedLinearizable: batch b's k-th item.
type mixItem struct {
	B int `json:"b"`
	K int `json:"k"`
}

// TestMixedLinearizable runs 8 goroutines of appends, reads, latest-N
// reads, pops and clears on one session and checks what needs no full
// checker: nothing is popped twice; every read shows each batch in order
// and contiguous (a full read, a prefix of it: pops take from the end);
// and a pop never takes an item below one that was there throughout it:
// an item of a later batch, appended before the pop started, and still
// there in a read that started after the pop ended (items never come
// back).
func TestMixedLinearizable(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	stores := []*Store{openStore(t, Options{Schema: schema}), openStore(t, Options{Schema: schema})}
	const workers, opsEach = 8, 40
	type batchOp struct{ start, end time.Time }
	type popOp struct {
		it         mixItem
		start, end time.Time
	}
	type readOp struct {
		view       []mixItem
		full       bool
		start, end time.Time
	}
	var (
		mu      sync.Mutex
		batches = map[int]batchOp{}
		pops    []popOp
		reads   []readOp
		next    int
	)
	parse := func(items []session.Item) []mixItem {
		out := make([]mixItem, len(items))
		for i, it := range items {
			require.NoError(t, json.Unmarshal([]byte(it.String()), &out[i]))
		}
		return out
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s, err := stores[w%2].Session("mixed")
			if err != nil {
				errs <- err
				return
			}
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range opsEach {
				start := time.Now()
				switch r := rng.IntN(100); {
				case r < 40:
					mu.Lock()
					b := next
					next++
					mu.Unlock()
					var items []session.Item
					for k := range 1 + rng.IntN(3) {
						items = append(items, item(fmt.Sprintf(`{"b":%d,"k":%d}`, b, k)))
					}
					if err := s.AddItems(ctx, items); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					batches[b] = batchOp{start, time.Now()}
					mu.Unlock()
				case r < 60:
					it, ok, err := s.PopItem(ctx)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						var m mixItem
						if err := json.Unmarshal([]byte(it.String()), &m); err != nil {
							errs <- err
							return
						}
						mu.Lock()
						pops = append(pops, popOp{m, start, time.Now()})
						mu.Unlock()
					}
				case r < 97:
					full := r < 80
					var items []session.Item
					if full {
						items, err = s.Items(ctx)
					} else {
						items, err = s.LatestItems(ctx, 1+rng.IntN(6))
					}
					if err != nil {
						errs <- err
						return
					}
					end := time.Now()
					mu.Lock()
					reads = append(reads, readOp{nil, full, start, end})
					reads[len(reads)-1].view = make([]mixItem, 0, len(items))
					for _, it := range items {
						var m mixItem
						if err := json.Unmarshal([]byte(it.String()), &m); err != nil {
							mu.Unlock()
							errs <- err
							return
						}
						reads[len(reads)-1].view = append(reads[len(reads)-1].view, m)
					}
					mu.Unlock()
				default:
					if err := s.Clear(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, _ := stores[0].Session("mixed")
	final, err := s.Items(ctx)
	require.NoError(t, err)
	reads = append(reads, readOp{parse(final), true, time.Now(), time.Now()})

	popped := map[mixItem]bool{}
	for _, p := range pops {
		require.False(t, popped[p.it], "%v popped twice", p.it)
		popped[p.it] = true
	}
	for _, r := range reads {
		for i, m := range r.view {
			switch {
			case i > 0 && r.view[i-1].B == m.B:
				require.Equal(t, r.view[i-1].K+1, m.K, "batch %d out of order or torn in %v", m.B, r.view)
			case r.full || i > 0:
				require.Equal(t, 0, m.K, "batch %d does not start with its first item in %v", m.B, r.view)
			}
			if i > 0 && r.view[i-1].B != m.B {
				for _, prev := range r.view[:i] {
					require.NotEqual(t, m.B, prev.B, "batch %d in two places in %v", m.B, r.view)
				}
			}
		}
	}
	for _, p := range pops {
		below := batches[p.it.B]
		for _, r := range reads {
			if !r.start.After(p.end) {
				continue
			}
			for _, m := range r.view {
				above := batches[m.B]
				if m.B != p.it.B && below.end.Before(above.start) && above.end.Before(p.start) {
					t.Fatalf("a pop took %v while %v, appended after it and before the pop, stayed (read %v)", p.it, m, r.view)
				}
			}
		}
	}
	t.Logf("%d batches, %d pops, %d reads; %d items left", len(batches), len(pops), len(reads), len(final))
}
