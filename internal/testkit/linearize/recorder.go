package linearize

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
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
	// Mix weighs the operations; the zero Mix means DefaultMix. Record
	// does not choose AppendOnce on a session that is not a
	// session.OnceAppender (session.Probe), LoadCheckpoint,
	// SaveCheckpoint and DeleteCheckpoint on one that is not a
	// session.CheckpointStore, nor Commit on one that is not a
	// session.CheckpointCommitter: they have no fallback. Follow runs on
	// every session: session.ReadSince has one.
	Mix Mix
	// Handles, if not nil, holds another handle of the recorded session
	// for each client: its checkpoint operations go through it, so that
	// each client commits through a handle of its own, as a run-state
	// loop does (the Redis adapter holds a connection for a handle's
	// back-to-back commits). Without one, a client commits through the
	// session Record is given, like its other operations.
	Handles []session.Session
	// Pace, when positive, has each client pause after each operation for
	// a random time up to Pace times its mean operation latency (a moving
	// average). It bounds how many operations overlap where operations
	// queue (SQLite's writers wait for the file lock): checking is
	// exponential in that number, since the checker must try the orders
	// of overlapping writes until a read tells them apart. Where a client
	// waits less, the backend is busier and more operations overlap; where
	// the backend is slow because it is busy, clients slow down.
	Pace float64
}

// Mix weighs the operations clients choose, by Kind.
type Mix [11]int

// DefaultMix is the mix of the campaign. Reads are frequent, and Items is
// a third of them: each read prunes the orders of the concurrent writes
// the checker must consider, and a full read prunes them all, which keeps
// checking histories of slow, overlapping writes (SQLite's, under
// contention) feasible; so does a Follow that finds its cursor intact (it
// shows the whole history: what the cursor stands for and what follows).
// Pops and short Latest reads look at the end of the list, where writers
// race, and pops make cursors lost; clears are rare. Half of the
// AppendOnce calls retry a recent operation id (see Record). Commits come
// in runs of up to commitRun that land: three in four that land are
// followed at once by another. Saves and deletes are at the version the
// client saw last, one save in saveAny and one delete in deleteAny at
// session.AnyVersion. A commit, save or delete that did not land is
// followed at once by a LoadCheckpoint and another of its kind. Deletes
// are frequent enough that every backend's two short histories run some:
// about 3 in 100 operations.
var DefaultMix = Mix{AddItems: 24, Items: 16, Latest: 20, PopItem: 20, Clear: 3, Follow: 12, AppendOnce: 8,
	Commit: 8, LoadCheckpoint: 4, SaveCheckpoint: 6, DeleteCheckpoint: 4}

// saveAny and deleteAny: one save in saveAny, and one delete in
// deleteAny, is at session.AnyVersion.
const (
	saveAny   = 6
	deleteAny = 4
)

func (m Mix) pick(rng *rand.Rand) Kind {
	total := 0
	for _, w := range m {
		total += w
	}
	r := rng.IntN(total)
	for k, w := range m {
		if r < w {
			return Kind(k)
		}
		r -= w
	}
	return Kind(len(m) - 1)
}

var latestNs = [...]int{1, 2, 3, 5, 10}

// client is what one client of Record keeps between its operations.
type client struct {
	id  int
	seq int // items written
	// cursor is the cursor its last Follow returned, and known the
	// history that Follow saw (what the cursor stands for).
	cursor session.Cursor
	known  []ID
	// retry is the operation id of its last AppendOnce if that failed
	// (-1: none): its next AppendOnce retries it, as a caller that lost
	// the answer does.
	retry int
	// ck is the handle it loads, saves and deletes the checkpoint
	// through, and cc the same handle as a committer (nil: the session is
	// not one); version is the checkpoint version it saw last, which it
	// commits, saves and deletes at. stale is set when its last commit,
	// save or delete did not land (a conflict, or an error): it loads the
	// checkpoint before it writes it again, as a run-state loop that lost
	// a race does. landed counts the commits of its current run that
	// landed, and again is set when its next operation is then: a commit
	// that continues the run, or the write a load after a stale one
	// retries, right after the last, with no pause (Config.Pace) between.
	ck           session.CheckpointStore
	cc           session.CheckpointCommitter
	version      int64
	stale, again bool
	then         Kind
	landed       int
}

// commitRun is the most commits a client's run of back-to-back commits
// lands: the Redis adapter commits the third and later ones on the
// connection it holds for the handle.
const commitRun = 4

// onceOps hands out AppendOnce's operations: a fresh one, or one of the
// latest two handed out, likely still running at another client, so that
// retries run concurrently too. Processes recording one session each have
// their own, from 0: the same operation in two of them is a retry across
// processes, with the same batch (OnceBatch).
type onceOps struct{ next atomic.Int64 }

func (o *onceOps) pick(rng *rand.Rand) int {
	n := o.next.Load()
	if n == 0 || rng.IntN(2) == 0 {
		return int(o.next.Add(1) - 1)
	}
	return int(n - 1 - rng.Int64N(min(n, 2)))
}

// Record runs cfg.Clients clients against s at once, each running cfg.Ops
// random operations, and returns what they did and saw.
func Record(ctx context.Context, s session.Session, cfg Config) History {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 20 * time.Millisecond
	}
	if cfg.Mix == (Mix{}) {
		cfg.Mix = DefaultMix
	}
	if !session.Probe(s).Has(session.CapAppendOnce) {
		cfg.Mix[AppendOnce] = 0
	}
	store, stores := s.(session.CheckpointStore)
	if !stores {
		cfg.Mix[LoadCheckpoint], cfg.Mix[SaveCheckpoint], cfg.Mix[DeleteCheckpoint] = 0, 0, 0
	}
	committer, commits := s.(session.CheckpointCommitter)
	if !commits {
		cfg.Mix[Commit] = 0
	}
	var (
		mu   sync.Mutex
		out  = make(History, 0, cfg.Clients*cfg.Ops)
		wg   sync.WaitGroup
		once onceOps
	)
	for c := range cfg.Clients {
		cl := &client{id: cfg.FirstClient + c, retry: -1, ck: store, cc: committer}
		if c < len(cfg.Handles) {
			if h, ok := cfg.Handles[c].(session.CheckpointStore); ok && stores {
				cl.ck = h
			}
			if h, ok := cfg.Handles[c].(session.CheckpointCommitter); ok && commits {
				cl.cc = h
			}
		}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cl.id)))
			mine := make(History, 0, cfg.Ops)
			var mean float64 // moving average of the latency, ns
			for range cfg.Ops {
				kind := cfg.Mix.pick(rng)
				if cl.again {
					kind = cl.then
				}
				op := cl.run(ctx, s, rng, &once, kind, cfg.Timeout)
				mine = append(mine, op)
				if mean == 0 {
					mean = float64(op.Return - op.Call)
				} else {
					mean = 0.8*mean + 0.2*float64(op.Return-op.Call)
				}
				if cfg.Pace > 0 && !cl.again {
					time.Sleep(time.Duration(rng.Float64() * cfg.Pace * mean))
				}
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

// batch returns 1 to 3 new items of the client, and their IDs.
func (cl *client) batch(rng *rand.Rand) ([]ID, []session.Item) {
	n := 1 + rng.IntN(3)
	ids, items := make([]ID, n), make([]session.Item, n)
	for i := range n {
		ids[i] = MakeID(cl.id, cl.seq)
		items[i] = ids[i].Item()
		cl.seq++
	}
	return ids, items
}

func (cl *client) run(ctx context.Context, s session.Session, rng *rand.Rand, once *onceOps, kind Kind, timeout time.Duration) Op {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	op := Op{Client: cl.id}
	var err error
	// A client whose last checkpoint write did not land loads the
	// checkpoint and writes again at once, as a run-state loop that lost a
	// race does.
	retry := kind.checkpointWrite() && cl.stale
	if retry {
		cl.then, kind = kind, LoadCheckpoint
	}
	switch kind {
	case AddItems:
		batch, items := cl.batch(rng)
		op.Input = Input{Kind: AddItems, Batch: batch}
		op.Call = Now()
		err = session.Append(ctx, s, items)
	case Follow:
		op.Input = Input{Kind: Follow, N: len(cl.known), Seen: slices.Clone(cl.known)}
		if len(cl.known) > 0 {
			op.Input.Last = cl.known[len(cl.known)-1]
		}
		op.Call = Now()
		var items []session.Item
		var next session.Cursor
		items, next, err = session.ReadSince(ctx, s, cl.cursor)
		switch {
		case errors.Is(err, session.ErrCursorLost):
			err = nil
			op.Output.Lost = true
			cl.cursor, cl.known = "", nil // read again from the start
		case errors.Is(err, session.ErrInvalidCursor):
			err = nil
			op.Output.Invalid = true
			cl.cursor, cl.known = "", nil
		case err == nil:
			op.Output.Items = ParseIDs(items)
			cl.cursor, cl.known = next, append(cl.known, op.Output.Items...)
		}
	case AppendOnce:
		n := cl.retry
		if n < 0 {
			n = once.pick(rng)
		}
		op.Input = Input{Kind: AppendOnce, Op: n, Batch: OnceBatch(n)}
		items := make([]session.Item, len(op.Input.Batch))
		for i, id := range op.Input.Batch {
			items[i] = id.Item()
		}
		op.Call = Now()
		op.Output.OK, err = session.AppendOnce(ctx, s, OnceOpID(n), items)
		cl.retry = -1
		if err != nil {
			cl.retry = n
		}
	case Commit:
		doc := MakeID(cl.id, cl.seq)
		cl.seq++
		batch, items := cl.batch(rng)
		op.Input = Input{Kind: Commit, Batch: batch, Version: cl.version, Doc: doc}
		op.Call = Now()
		var v int64
		v, err = cl.cc.AppendWithCheckpoint(ctx, items, CheckpointName, op.Input.Doc.Doc(), cl.version)
		landed := cl.landed + 1
		cl.stale, cl.again, cl.landed = err != nil, false, 0
		switch {
		case errors.Is(err, session.ErrCheckpointConflict):
			err = nil
		case err == nil:
			op.Output = Output{OK: true, Version: v}
			cl.version, cl.landed = v, landed
			cl.again, cl.then = landed < commitRun && rng.IntN(4) > 0, Commit
		}
	case SaveCheckpoint:
		doc := MakeID(cl.id, cl.seq)
		cl.seq++
		version := cl.version
		if rng.IntN(saveAny) == 0 {
			version = session.AnyVersion
		}
		op.Input = Input{Kind: SaveCheckpoint, Version: version, Doc: doc}
		op.Call = Now()
		var v int64
		v, err = cl.ck.SaveCheckpoint(ctx, CheckpointName, doc.Doc(), version)
		cl.stale, cl.again, cl.landed = err != nil, false, 0
		switch {
		case errors.Is(err, session.ErrCheckpointConflict):
			err = nil
		case err == nil:
			op.Output = Output{OK: true, Version: v}
			cl.version = v
		}
	case DeleteCheckpoint:
		version := cl.version
		if rng.IntN(deleteAny) == 0 {
			version = session.AnyVersion
		}
		op.Input = Input{Kind: DeleteCheckpoint, Version: version}
		op.Call = Now()
		err = cl.ck.DeleteCheckpoint(ctx, CheckpointName, version)
		cl.stale, cl.again, cl.landed = err != nil, false, 0
		switch {
		case errors.Is(err, session.ErrCheckpointConflict):
			err = nil
		case err == nil:
			op.Output.OK = true
			cl.version = 0
		}
	case LoadCheckpoint:
		op.Input = Input{Kind: LoadCheckpoint}
		op.Call = Now()
		var doc []byte
		var v int64
		doc, v, err = cl.ck.LoadCheckpoint(ctx, CheckpointName)
		switch {
		case errors.Is(err, session.ErrNoCheckpoint):
			err = nil
			cl.version, cl.stale = 0, false
		case err == nil:
			op.Output = Output{OK: true, Version: v, Doc: ParseDoc(doc)}
			cl.version, cl.stale = v, false
		}
		cl.again = retry && err == nil
	case Items:
		op.Input = Input{Kind: Items}
		op.Call = Now()
		var items []session.Item
		items, err = session.All(ctx, s)
		op.Output.Items = ParseIDs(items)
	case Latest:
		op.Input = Input{Kind: Latest, N: latestNs[rng.IntN(len(latestNs))]}
		op.Call = Now()
		var items []session.Item
		items, err = session.Latest(ctx, s, op.Input.N)
		op.Output.Items = ParseIDs(items)
	case PopItem:
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
