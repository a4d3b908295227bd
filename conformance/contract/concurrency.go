package contract

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// Concurrency shape: two handles × 8 goroutines × 50 batches of 5. The
// 16 writers overlap from the first batch to the last; more batches made
// the clause minutes long on the Mongo-wire test server and caught
// nothing more (the linearizability campaign, internal/testkit/linearize,
// is where concurrent histories are checked at length).
const (
	concHandles    = 2
	concGoroutines = 8
	concBatches    = 50
	concBatchSize  = 5
)

func clauseConcurrentWriters(c *suite.C) {
	id := c.ID("conc")
	handles := []session.Session{c.Open(id), c.OpenPeer(id)}
	var wg sync.WaitGroup
	errs := make(chan error, concHandles*concGoroutines)
	for h := 0; h < concHandles; h++ {
		for g := 0; g < concGoroutines; g++ {
			wg.Add(1)
			go func(s session.Session, writer string) {
				defer wg.Done()
				for b := 0; b < concBatches; b++ {
					batch := make([]session.Item, concBatchSize)
					for i := range batch {
						batch[i] = session.MustItem(fmt.Sprintf(`{"w":%q,"b":%d,"i":%d}`, writer, b, i))
					}
					if err := s.AddItems(c.Context(), batch); err != nil {
						errs <- fmt.Errorf("writer %s batch %d: %w", writer, b, err)
						return
					}
				}
			}(handles[h], fmt.Sprintf("%d.%d", h, g))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.Fatalf("concurrent append failed: %v", err)
	}
	got := all(c, handles[0])
	require.Len(c, got, concHandles*concGoroutines*concBatches*concBatchSize, "nothing lost, nothing duplicated")
	next := map[string]int{} // writer -> next batch expected
	for i := 0; i < len(got); i += concBatchSize {
		var w string
		var b int
		for j := 0; j < concBatchSize; j++ {
			k := parseConc(c, got[i+j])
			if j == 0 {
				w, b = k.w, k.b
			}
			require.Equal(c, concKey{w, b, j}, k, "batch interleaved at position %d", i+j)
		}
		require.Equal(c, next[w], b, "writer %s's batches out of order or duplicated", w)
		next[w] = b + 1
	}
	require.Len(c, next, concHandles*concGoroutines)
}

type concKey struct {
	w    string
	b, i int
}

func parseConc(c *suite.C, it session.Item) concKey {
	c.Helper()
	w, _ := it.StringField("w")
	b, _ := it.Field("b")
	i, _ := it.Field("i")
	bn, err1 := strconv.Atoi(strings.TrimSpace(string(b)))
	in, err2 := strconv.Atoi(strings.TrimSpace(string(i)))
	require.NoError(c, err1)
	require.NoError(c, err2)
	return concKey{w, bn, in}
}
