package linearize

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Config sets what Record runs.
type Config struct {
	// Clients is the number of concurrent clients, one goroutine each.
	Clients int
	// FirstClient is the number of the first client. Processes recording
	// the same session give theirs disjoint ranges, so that items stay
	// unique.
	FirstClient int
	// Ops is the number of operations each client runs.
	Ops int
	// Seed makes each client's choices reproducible.
	Seed uint64
	// Timeout bounds each operation; zero means 10 s.
	Timeout time.Duration
	// Backoff is how long a client waits after an error; zero means 20 ms.
	Backoff time.Duration
	// Progress, if not nil, counts the operations done, for a fault
	// injector that acts at a point of the history.
	Progress *atomic.Int64
}

// The operation mix, per hundred: writes dominate so that the list grows,
// pops and small Latest reads look at its end, where writers race.
const (
	pctAdd    = 40
	pctItems  = 12
	pctLatest = 20
	pctPop    = 25
	// the rest, 3, clears
)

var latestNs = [...]int{1, 2, 3, 5, 10}

// Record runs cfg.Clients clients against s at once, each running cfg.Ops
// random operations, and returns what they did and saw.
func Record(ctx context.Context, s session.Session, cfg Config) History {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 20 * time.Millisecond
	}
	var (
		mu  sync.Mutex
		out = make(History, 0, cfg.Clients*cfg.Ops)
		wg  sync.WaitGroup
	)
	for c := range cfg.Clients {
		client := cfg.FirstClient + c
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(client)))
			mine := make(History, 0, cfg.Ops)
			seq := 0
			for range cfg.Ops {
				op := runOne(ctx, s, client, &seq, rng, cfg.Timeout)
				mine = append(mine, op)
				if cfg.Progress != nil {
					cfg.Progress.Add(1)
				}
				if op.Err != "" {
					time.Sleep(cfg.Backoff)
				}
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func runOne(ctx context.Context, s session.Session, client int, seq *int, rng *rand.Rand, timeout time.Duration) Op {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	op := Op{Client: client}
	var err error
	switch p := rng.IntN(100); {
	case p < pctAdd:
		n := 1 + rng.IntN(3)
		op.Input = Input{Kind: AddItems, Batch: make([]ID, n)}
		items := make([]session.Item, n)
		for i := range n {
			id := MakeID(client, *seq)
			*seq++
			op.Input.Batch[i] = id
			items[i] = id.Item()
		}
		op.Call = Now()
		err = session.Append(ctx, s, items)
	case p < pctAdd+pctItems:
		op.Input = Input{Kind: Items}
		op.Call = Now()
		var items []session.Item
		items, err = session.All(ctx, s)
		op.Output.Items = ParseIDs(items)
	case p < pctAdd+pctItems+pctLatest:
		op.Input = Input{Kind: Latest, N: latestNs[rng.IntN(len(latestNs))]}
		op.Call = Now()
		var items []session.Item
		items, err = session.Latest(ctx, s, op.Input.N)
		op.Output.Items = ParseIDs(items)
	case p < pctAdd+pctItems+pctLatest+pctPop:
		op.Input = Input{Kind: PopItem}
		op.Call = Now()
		var it session.Item
		it, op.Output.OK, err = session.Pop(ctx, s)
		if op.Output.OK {
			op.Output.Popped = ParseID(it)
		}
	default:
		op.Input = Input{Kind: Clear}
		op.Call = Now()
		err = session.Clear(ctx, s)
	}
	op.Return = Now()
	if err != nil {
		op.Err = err.Error()
		op.Output = Output{Unknown: true}
	}
	return op
}
