package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// orderItem is an item of TestOrderBesidePython: writer w's batch b, item k.
type orderItem struct {
	W string `json:"w"`
	B int    `json:"b"`
	K int    `json:"k"`
}

// TestOrderBesidePython: one Go writer and two goroutines issuing
// SQLAlchemySession.add_items's statements append batches to one session
// at once; then Go's Items and Python's get_items (its SELECT ... ORDER BY
// created_at, id) read the same history, latest-N too, and every batch is
// whole and in order. 3 runs of 120 batches per writer; SESSIONS_LONG=1
// makes it 20.
func TestOrderBesidePython(t *testing.T) {
	runs := 3
	if os.Getenv("SESSIONS_LONG") == "1" {
		runs = 20
	}
	const perWriter = 120
	ctx := context.Background()
	schema := freshSchema(t)
	c := connect(t)
	pyCreateTables(t, c, schema)
	st := openStore(t, Options{Schema: schema})
	pyConns := make([]*pgx.Conn, 2)
	for i := range pyConns {
		pyConns[i] = connect(t)
		_, err := pyConns[i].Exec(ctx, `SET search_path TO `+schema)
		require.NoError(t, err)
	}
	batch := func(w string, b, n int) []string {
		out := make([]string, n)
		for k := range out {
			out[k] = fmt.Sprintf(`{"w":"%s","b":%d,"k":%d}`, w, b, k)
		}
		return out
	}
	var sizes [3]map[int]int // writer -> batch -> size
	var ties []string
	for run := range runs {
		id := fmt.Sprintf("order-%d", run)
		g, err := st.Session(id)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for w := range 3 {
			sizes[w] = map[int]int{}
			rng := rand.New(rand.NewPCG(uint64(run), uint64(w)))
			for b := range perWriter {
				sizes[w][b] = 1 + rng.IntN(4)
			}
			name := [3]string{"go", "py1", "py2"}[w]
			wg.Go(func() {
				var py *pySession
				if w > 0 {
					py = &pySession{t: t, c: pyConns[w-1], schema: schema, id: id}
				}
				for b := range perWriter {
					texts := batch(name, b, sizes[w][b])
					var err error
					if py != nil {
						err = py.addItemsErr(texts...)
					} else {
						items := make([]session.Item, len(texts))
						for i, s := range texts {
							items[i] = item(s)
						}
						err = g.AddItems(ctx, items)
					}
					if err != nil {
						errs <- fmt.Errorf("%s batch %d: %w", name, b, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		goView, err := g.Items(ctx)
		require.NoError(t, err)
		py := &pySession{t: t, c: c, id: id}
		_, err = c.Exec(ctx, `SET search_path TO `+schema)
		require.NoError(t, err)
		pyView := py.getItems(-1)
		require.Equal(t, pyView, strs(goView), "run %d: Go and Python read one history", run)
		for _, n := range []int{1, 7, 50} {
			latest, err := g.LatestItems(ctx, n)
			require.NoError(t, err)
			require.Equal(t, py.getItems(n), strs(latest), "run %d: latest %d", run, n)
		}
		total := 0
		for w := range 3 {
			for _, n := range sizes[w] {
				total += n
			}
		}
		require.Len(t, pyView, total, "run %d: every item", run)
		seen := map[[2]any]bool{}
		var prev orderItem
		for i, s := range pyView {
			var it orderItem
			require.NoError(t, json.Unmarshal([]byte(s), &it))
			if i > 0 && prev.W == it.W && prev.B == it.B {
				require.Equal(t, prev.K+1, it.K, "run %d: batch %s/%d out of order at %d", run, it.W, it.B, i)
			} else {
				if i > 0 {
					w := slices.Index([]string{"go", "py1", "py2"}, prev.W)
					require.Equal(t, sizes[w][prev.B]-1, prev.K, "run %d: batch %s/%d cut short at %d by %s/%d", run, prev.W, prev.B, i, it.W, it.B)
				}
				require.Equal(t, 0, it.K, "run %d: batch %s/%d starts at item %d, at %d", run, it.W, it.B, it.K, i)
				key := [2]any{it.W, it.B}
				require.False(t, seen[key], "run %d: batch %s/%d in two places", run, it.W, it.B)
				seen[key] = true
			}
			prev = it
		}
		// Batches sharing a created_at: only a Python batch tying with
		// another Python batch to the microsecond could interleave.
		rows, err := c.Query(ctx, `SELECT string_agg(DISTINCT (message_data::json->>'w') || '/' || (message_data::json->>'b'), ' ')
			FROM agent_messages WHERE session_id = $1
			GROUP BY created_at HAVING count(DISTINCT (message_data::json->>'w') || '/' || (message_data::json->>'b')) > 1`, id)
		require.NoError(t, err)
		tied, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		ties = append(ties, tied...)
	}
	t.Logf("%d runs x %d batches per writer (1 Go, 2 Python): views identical and every batch whole, every run; batches sharing a created_at: %v", runs, perWriter, ties)
}
