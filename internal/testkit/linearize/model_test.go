package linearize

import (
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/agentsessions/sessions/session"
)

// op builds an operation for the model's own tests; ret == Never marks a
// failed one.
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	if ret == Never {
		out = Output{Unknown: true}
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func add(ids ...ID) Input   { return Input{Kind: AddItems, Batch: ids} }
func read(ids ...ID) Output { return Output{Items: ids} }
func popped(id ID) Output   { return Output{Popped: id, OK: true} }
func latest(n int) Input    { return Input{Kind: Latest, N: n} }
func check(ops ...porcupine.Operation) porcupine.CheckResult {
	return Check(ops, 10*time.Second)
}

var (
	a1, a2 = MakeID(1, 0), MakeID(1, 1)
	b1, b2 = MakeID(2, 0), MakeID(2, 1)
)

func TestID(t *testing.T) {
	for _, id := range []ID{MakeID(0, 0), MakeID(3, 17), MakeID(115, 1<<31)} {
		if got := ParseID(id.Item()); got != id {
			t.Errorf("ParseID(%v.Item()) = %v", id, got)
		}
	}
	if got := ParseID(MakeID(1, 2).Item()); got.Client() != 1 || got.Seq() != 2 {
		t.Errorf("client %d seq %d", got.Client(), got.Seq())
	}
	for _, id := range []ID{MakeID(0, 0), MakeID(3, 17)} {
		if got := ParseDoc(id.Doc()); got != id {
			t.Errorf("ParseDoc(%v.Doc()) = %v", id, got)
		}
	}
	for _, doc := range []string{``, `{}`, `{"doc":"x"}`, `[1]`} {
		if got := ParseDoc([]byte(doc)); got != NoID {
			t.Errorf("ParseDoc(%q) = %v", doc, got)
		}
	}
}

func TestModel(t *testing.T) {
	items, pop, clear := Input{Kind: Items}, Input{Kind: PopItem}, Input{Kind: Clear}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, 3, add(b1), Output{}),
			op(1, 4, 5, items, read(a1, a2, b1)),
			op(1, 6, 7, latest(2), read(a2, b1)),
			op(2, 8, 9, pop, popped(b1)),
			op(2, 10, 11, clear, Output{}),
			op(1, 12, 13, pop, Output{}),
		}, porcupine.Ok},
		{"concurrent writes in either order", []porcupine.Operation{
			op(1, 0, 10, add(a1), Output{}),
			op(2, 0, 10, add(b1), Output{}),
			op(1, 11, 12, items, read(b1, a1)),
		}, porcupine.Ok},
		{"a read overlapping a write sees it or not", []porcupine.Operation{
			op(1, 0, 10, add(a1), Output{}),
			op(2, 1, 2, items, read()),
			op(2, 3, 4, items, read(a1)),
		}, porcupine.Ok},
		{"acknowledged write lost", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, items, read()),
		}, porcupine.Illegal},
		{"batch split", []porcupine.Operation{
			op(1, 0, 10, add(a1, a2), Output{}),
			op(2, 0, 10, add(b1, b2), Output{}),
			op(1, 11, 12, items, read(a1, b1, a2, b2)),
		}, porcupine.Illegal},
		{"partial batch seen", []porcupine.Operation{
			op(1, 0, 10, add(a1, a2), Output{}),
			op(2, 1, 2, latest(5), read(a1)),
		}, porcupine.Illegal},
		{"one item popped twice", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(1, 2, 5, pop, popped(a2)),
			op(2, 2, 5, pop, popped(a2)),
		}, porcupine.Illegal},
		{"failed write applied late", []porcupine.Operation{
			op(1, 0, Never, add(a1), Output{}),
			op(2, 5, 6, items, read()),
			op(2, 7, 8, add(b1), Output{}),
			op(2, 9, 10, items, read(b1, a1)),
		}, porcupine.Ok},
		{"failed write never applied", []porcupine.Operation{
			op(1, 0, Never, add(a1), Output{}),
			op(2, 5, 6, add(b1), Output{}),
			op(2, 9, 10, items, read(b1)),
		}, porcupine.Ok},
		{"failed write cannot precede its call", []porcupine.Operation{
			op(2, 0, 1, items, read(a1)),
			op(1, 5, Never, add(a1), Output{}),
		}, porcupine.Illegal},
		{"failed pop took the newest", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, Never, pop, Output{}),
			op(1, 5, 6, items, read(a1)),
		}, porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.ops...); got != c.want {
				t.Fatalf("Check = %v, want %v\n%s", got, c.want, Explain(c.ops))
			}
		})
	}
}

// TestMinimize: the lost write survives minimizing with the read that
// misses it; the noise around it goes.
func TestMinimize(t *testing.T) {
	var ops []porcupine.Operation
	tm := int64(0)
	next := func() (int64, int64) { tm += 10; return tm, tm + 5 }
	for i := range 20 {
		c, r := next()
		ops = append(ops, op(3, c, r, add(MakeID(3, i)), Output{}))
	}
	c, r := next()
	ops = append(ops, op(1, c, r, add(a1), Output{})) // lost
	var after []ID
	for i := range 20 {
		after = append(after, MakeID(3, i))
	}
	for range 5 {
		c, r := next()
		ops = append(ops, op(2, c, r, latest(3), read(after[17:]...)))
	}
	small := Minimize(ops, 10*time.Second, time.Second)
	if check(small...) != porcupine.Illegal {
		t.Fatal("the minimized history is linearizable")
	}
	if len(small) > 5 {
		t.Fatalf("%d operations left of %d:\n%s", len(small), len(ops), Explain(small))
	}
	t.Logf("%d operations left of %d:\n%s", len(small), len(ops), Explain(small))
}

func follow(n int, last ID) Input { return Input{Kind: Follow, N: n, Last: last} }

var lost = Output{Lost: true}

func once(op int) Input { return Input{Kind: AppendOnce, Op: op, Batch: OnceBatch(op)} }

var (
	appended = Output{OK: true}
	retried  = Output{}
)

// TestModelFollow: a cursor stands for the history its client saw last;
// it is lost exactly when its last item is gone, and the zero cursor
// never is (session.ErrCursorLost, session.Follower, docs/semantics.md
// §2.1).
func TestModelFollow(t *testing.T) {
	items, pop, clear := Input{Kind: Items}, Input{Kind: PopItem}, Input{Kind: Clear}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"from the start, then what is new", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(1, 4, 5, add(a2, b1), Output{}),
			op(2, 6, 7, follow(1, a1), read(a2, b1)),
			op(2, 8, 9, follow(3, b1), read()),
		}, porcupine.Ok},
		{"an item read twice", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1, a2)),
			op(1, 4, 5, add(b1), Output{}),
			op(2, 6, 7, follow(2, a2), read(a2, b1)),
		}, porcupine.Illegal},
		{"an item missed", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(1, 4, 5, add(a2, b1), Output{}),
			op(2, 6, 7, follow(1, a1), read(b1)),
		}, porcupine.Illegal},
		{"a pop after the cursor keeps it", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(1, 4, 5, add(a2), Output{}),
			op(1, 6, 7, pop, popped(a2)),
			op(1, 8, 9, add(b1), Output{}),
			op(2, 10, 11, follow(1, a1), read(b1)),
		}, porcupine.Ok},
		{"a pop after the cursor reported as lost", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(1, 4, 5, add(a2), Output{}),
			op(1, 6, 7, pop, popped(a2)),
			op(2, 10, 11, follow(1, a1), lost),
		}, porcupine.Illegal},
		{"a pop of the cursor's item is reported", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1, a2)),
			op(1, 4, 5, pop, popped(a2)),
			op(2, 6, 7, follow(2, a2), lost),
		}, porcupine.Ok},
		{"a pop of the cursor's item hidden", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1, a2)),
			op(1, 4, 5, pop, popped(a2)),
			op(2, 6, 7, follow(2, a2), read()),
		}, porcupine.Illegal},
		{"a pop below the cursor hidden once the history grew back", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1, a2)),
			op(1, 4, 5, pop, popped(a2)),
			op(1, 6, 7, pop, popped(a1)),
			op(1, 8, 9, add(b1, b2, MakeID(2, 2)), Output{}),
			op(2, 10, 11, follow(2, a2), read(MakeID(2, 2))),
		}, porcupine.Illegal},
		{"a clear is reported", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(1, 4, 5, clear, Output{}),
			op(1, 6, 7, add(a2), Output{}),
			op(2, 8, 9, follow(1, a1), lost),
			op(2, 10, 11, follow(0, 0), read(a2)),
		}, porcupine.Ok},
		{"a clear hidden", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(1, 4, 5, clear, Output{}),
			op(1, 6, 7, add(a2), Output{}),
			op(2, 8, 9, follow(1, a1), read(a2)),
		}, porcupine.Illegal},
		{"the zero cursor is never lost, even across a clear", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(1, 2, 3, clear, Output{}),
			op(2, 4, 5, follow(0, 0), lost),
		}, porcupine.Illegal},
		{"a lost cursor where nothing changed", []porcupine.Operation{
			op(1, 0, 1, add(a1), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1)),
			op(2, 4, 5, follow(1, a1), lost),
		}, porcupine.Illegal},
		{"an invalid cursor is never right", []porcupine.Operation{
			op(2, 0, 1, follow(0, 0), Output{Invalid: true}),
		}, porcupine.Illegal},
		{"a pop overlapping the follow: lost or not, by the order", []porcupine.Operation{
			op(1, 0, 1, add(a1, a2), Output{}),
			op(2, 2, 3, follow(0, 0), read(a1, a2)),
			op(1, 4, 10, pop, popped(a2)),
			op(2, 5, 6, follow(2, a2), read()),
			op(2, 7, 8, follow(2, a2), lost),
			op(2, 11, 12, items, read(a1)),
		}, porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.ops...); got != c.want {
				t.Fatalf("Check = %v, want %v\n%s", got, c.want, Explain(c.ops))
			}
		})
	}
}

// TestModelAppendOnce: an operation id lands once per session, and Clear
// and PopItem keep it (session.OnceAppender).
func TestModelAppendOnce(t *testing.T) {
	items, pop, clear := Input{Kind: Items}, Input{Kind: PopItem}, Input{Kind: Clear}
	b0, b1 := OnceBatch(0), OnceBatch(1) // one item, two
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a retry appends nothing", []porcupine.Operation{
			op(1, 0, 1, once(1), appended),
			op(2, 2, 3, once(1), retried),
			op(1, 4, 5, items, read(b1...)),
		}, porcupine.Ok},
		{"a retry appended again", []porcupine.Operation{
			op(1, 0, 1, once(1), appended),
			op(2, 2, 3, once(1), appended),
		}, porcupine.Illegal},
		{"a retry's items seen twice", []porcupine.Operation{
			op(1, 0, 1, once(0), appended),
			op(2, 2, 3, once(0), retried),
			op(1, 4, 5, items, read(b0[0], b0[0])),
		}, porcupine.Illegal},
		{"concurrent retries: exactly one appends", []porcupine.Operation{
			op(1, 0, 10, once(1), retried),
			op(2, 0, 10, once(1), appended),
			op(3, 0, 10, once(1), retried),
			op(1, 11, 12, items, read(b1...)),
		}, porcupine.Ok},
		{"concurrent retries: none appends", []porcupine.Operation{
			op(1, 0, 10, once(1), retried),
			op(2, 0, 10, once(1), retried),
		}, porcupine.Illegal},
		{"the first call reports false", []porcupine.Operation{
			op(1, 0, 1, once(1), retried),
		}, porcupine.Illegal},
		{"a failed call landed: the retry is false", []porcupine.Operation{
			op(1, 0, Never, once(1), Output{}),
			op(1, 5, 6, once(1), retried),
			op(2, 7, 8, items, read(b1...)),
		}, porcupine.Ok},
		{"a failed call did not land: the retry appends", []porcupine.Operation{
			op(1, 0, Never, once(1), Output{}),
			op(2, 2, 3, items, read()),
			op(1, 5, 6, once(1), appended),
			op(2, 7, 8, items, read(b1...)),
		}, porcupine.Ok},
		{"the id outlives a clear", []porcupine.Operation{
			op(1, 0, 1, once(0), appended),
			op(1, 2, 3, clear, Output{}),
			op(2, 4, 5, once(0), retried),
			op(2, 6, 7, items, read()),
		}, porcupine.Ok},
		{"the id forgotten at a clear", []porcupine.Operation{
			op(1, 0, 1, once(0), appended),
			op(1, 2, 3, clear, Output{}),
			op(2, 4, 5, once(0), appended),
		}, porcupine.Illegal},
		{"the id outlives a pop of its batch", []porcupine.Operation{
			op(1, 0, 1, once(0), appended),
			op(1, 2, 3, pop, popped(b0[0])),
			op(2, 4, 5, once(0), appended),
		}, porcupine.Illegal},
		{"ids are per operation", []porcupine.Operation{
			op(1, 0, 1, once(0), appended),
			op(2, 2, 3, once(1), appended),
			op(2, 4, 5, items, read(append(slices.Clone(b0), b1...)...)),
		}, porcupine.Ok},
		{"a batch split", []porcupine.Operation{
			op(1, 0, 10, once(1), appended),
			op(2, 0, 10, add(a1), Output{}),
			op(2, 11, 12, items, read(b1[0], a1, b1[1])),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.ops...); got != c.want {
				t.Fatalf("Check = %v, want %v\n%s", got, c.want, Explain(c.ops))
			}
		})
	}
}

// TestMinimizeKeepsCursorItems: a position cursor hid a clear below it.
// The minimized history keeps the write of the items the cursor stands
// for, though the Follow that showed them goes: without that write, the
// cursor would stand for items no operation wrote.
func TestMinimizeKeepsCursorItems(t *testing.T) {
	clear := Input{Kind: Clear}
	cursor := follow(1, a1)
	cursor.Seen = []ID{a1}
	ops := []porcupine.Operation{
		op(1, 0, 1, add(a1), Output{}),
		op(2, 2, 3, follow(0, 0), read(a1)),
		op(1, 4, 5, clear, Output{}),
		op(1, 6, 7, add(b1), Output{}),
		op(2, 8, 9, cursor, read()),
	}
	small := Minimize(ops, 10*time.Second, time.Second)
	if check(small...) != porcupine.Illegal {
		t.Fatal("the minimized history is linearizable")
	}
	written := map[ID]bool{}
	for _, o := range small {
		for _, id := range o.Input.(Input).Batch {
			written[id] = true
		}
	}
	for _, o := range small {
		for _, id := range o.Input.(Input).Seen {
			if !written[id] {
				t.Fatalf("a cursor stands for %v, which no operation left writes:\n%s", id, Explain(small))
			}
		}
	}
	if len(small) >= len(ops) {
		t.Fatalf("nothing dropped:\n%s", Explain(small))
	}
	t.Logf("%d operations left of %d:\n%s", len(small), len(ops), Explain(small))
}

// commit is a Commit of batch at version, saving the document d.
func commit(version int64, d ID, batch ...ID) Input {
	return Input{Kind: Commit, Batch: batch, Version: version, Doc: d}
}

var (
	conflict  = Output{}
	loadInput = Input{Kind: LoadCheckpoint}
	none      = Output{}
)

func committed(version int64) Output    { return Output{OK: true, Version: version} }
func loaded(version int64, d ID) Output { return Output{OK: true, Version: version, Doc: d} }

// TestModelCheckpoint: a commit appends its batch and saves the checkpoint
// at the next version iff the stored version is the one it names, and
// otherwise writes nothing (session.CheckpointCommitter); Clear keeps the
// checkpoint (session.CheckpointStore).
func TestModelCheckpoint(t *testing.T) {
	items, pop, clear := Input{Kind: Items}, Input{Kind: PopItem}, Input{Kind: Clear}
	d1, d2 := MakeID(1, 100), MakeID(2, 100)
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{
			op(1, 0, 1, loadInput, none),
			op(1, 2, 3, commit(0, d1, a1), committed(1)),
			op(2, 4, 5, loadInput, loaded(1, d1)),
			op(2, 6, 7, commit(1, d2, b1, b2), committed(2)),
			op(1, 8, 9, items, read(a1, b1, b2)),
			op(1, 10, 11, loadInput, loaded(2, d2)),
		}, porcupine.Ok},
		{"a stale commit conflicts and writes nothing", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(2, 2, 3, commit(0, d2, b1), conflict),
			op(1, 4, 5, items, read(a1)),
			op(1, 6, 7, loadInput, loaded(1, d1)),
		}, porcupine.Ok},
		{"a stale commit lands", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(2, 2, 3, commit(0, d2, b1), committed(1)),
		}, porcupine.Illegal},
		{"a stale commit's batch lands", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(2, 2, 3, commit(0, d2, b1), conflict),
			op(1, 4, 5, items, read(a1, b1)),
		}, porcupine.Illegal},
		{"a stale commit's document saved", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(2, 2, 3, commit(0, d2, b1), conflict),
			op(1, 4, 5, loadInput, loaded(1, d2)),
		}, porcupine.Illegal},
		{"a commit at the stored version conflicts", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), conflict),
		}, porcupine.Illegal},
		{"the new version is not the stored one plus one", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(1, 2, 3, commit(1, d2, a2), committed(3)),
		}, porcupine.Illegal},
		{"concurrent commits at one version: one lands", []porcupine.Operation{
			op(1, 0, 10, commit(0, d1, a1), conflict),
			op(2, 0, 10, commit(0, d2, b1), committed(1)),
			op(1, 11, 12, items, read(b1)),
			op(1, 13, 14, loadInput, loaded(1, d2)),
		}, porcupine.Ok},
		{"concurrent commits at one version: both land", []porcupine.Operation{
			op(1, 0, 10, commit(0, d1, a1), committed(1)),
			op(2, 0, 10, commit(0, d2, b1), committed(1)),
		}, porcupine.Illegal},
		{"concurrent commits in a chain, either way round", []porcupine.Operation{
			op(1, 0, 10, commit(1, d1, a1), committed(2)),
			op(2, 0, 10, commit(0, d2, b1), committed(1)),
			op(1, 11, 12, items, read(b1, a1)),
		}, porcupine.Ok},
		{"the checkpoint saved without the batch", []porcupine.Operation{
			op(1, 0, 10, commit(0, d1, a1, a2), committed(1)),
			op(2, 1, 2, loadInput, loaded(1, d1)),
			op(2, 3, 4, items, read()),
		}, porcupine.Illegal},
		{"the batch appended without the checkpoint", []porcupine.Operation{
			op(1, 0, 10, commit(0, d1, a1), committed(1)),
			op(2, 1, 2, items, read(a1)),
			op(2, 3, 4, loadInput, none),
		}, porcupine.Illegal},
		{"the checkpoint outlives a clear and a pop", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1, a2), committed(1)),
			op(1, 2, 3, pop, popped(a2)),
			op(1, 4, 5, clear, Output{}),
			op(2, 6, 7, loadInput, loaded(1, d1)),
			op(2, 8, 9, commit(1, d2, b1), committed(2)),
			op(2, 10, 11, items, read(b1)),
		}, porcupine.Ok},
		{"the checkpoint forgotten at a clear", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(1, 2, 3, clear, Output{}),
			op(2, 4, 5, loadInput, none),
		}, porcupine.Illegal},
		{"a failed commit landed late", []porcupine.Operation{
			op(1, 0, Never, commit(0, d1, a1), Output{}),
			op(2, 2, 3, loadInput, none),
			op(2, 4, 5, loadInput, loaded(1, d1)),
			op(2, 6, 7, items, read(a1)),
		}, porcupine.Ok},
		{"a failed commit did not land", []porcupine.Operation{
			op(1, 0, Never, commit(0, d1, a1), Output{}),
			op(2, 2, 3, commit(0, d2, b1), committed(1)),
			op(2, 4, 5, items, read(b1)),
		}, porcupine.Ok},
		{"a failed commit at another version landed", []porcupine.Operation{
			op(1, 0, Never, commit(5, d1, a1), Output{}),
			op(2, 2, 3, items, read(a1)),
		}, porcupine.Illegal},
		{"a failed commit landed before its call", []porcupine.Operation{
			op(2, 0, 1, loadInput, loaded(1, d1)),
			op(1, 2, Never, commit(0, d1, a1), Output{}),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.ops...); got != c.want {
				t.Fatalf("Check = %v, want %v\n%s", got, c.want, Explain(c.ops))
			}
		})
	}
}

// save is a SaveCheckpoint of the document d at version.
func save(version int64, d ID) Input { return Input{Kind: SaveCheckpoint, Version: version, Doc: d} }

// del is a DeleteCheckpoint at version.
func del(version int64) Input { return Input{Kind: DeleteCheckpoint, Version: version} }

var deleted = Output{OK: true}

// TestModelSaveDelete: a save or delete at the stored version, or at
// session.AnyVersion, succeeds, and any other conflicts and writes nothing
// (session.CheckpointStore); a delete of no checkpoint succeeds at version
// 0 and AnyVersion; a save after a delete creates the checkpoint at a
// version of at least 1, any (conformance's clauseCheckpointCRUD: the SQL
// stores start again at 1, Mongo's continues past its tombstone).
func TestModelSaveDelete(t *testing.T) {
	items := Input{Kind: Items}
	d1, d2, d3 := MakeID(1, 100), MakeID(2, 100), MakeID(3, 100)
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(1, d2), committed(2)),
			op(1, 4, 5, loadInput, loaded(2, d2)),
			op(1, 6, 7, del(2), deleted),
			op(2, 8, 9, loadInput, none),
			op(2, 10, 11, del(0), deleted),
			op(2, 12, 13, del(session.AnyVersion), deleted),
		}, porcupine.Ok},
		{"saves and commits share the version", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(2, 2, 3, save(1, d2), committed(2)),
			op(1, 4, 5, commit(1, d3, a2), conflict),
			op(1, 6, 7, commit(2, d3, a2), committed(3)),
			op(2, 8, 9, items, read(a1, a2)),
		}, porcupine.Ok},
		{"a stale save lands", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(0, d2), committed(2)),
		}, porcupine.Illegal},
		{"a stale save's document saved", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(0, d2), conflict),
			op(1, 4, 5, loadInput, loaded(1, d2)),
		}, porcupine.Illegal},
		{"a save at the stored version conflicts", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(1, d2), conflict),
		}, porcupine.Illegal},
		{"a save at AnyVersion overwrites and advances", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(session.AnyVersion, d2), committed(2)),
			op(1, 4, 5, save(1, d3), conflict),
			op(1, 6, 7, loadInput, loaded(2, d2)),
		}, porcupine.Ok},
		{"a save at AnyVersion conflicts", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(session.AnyVersion, d2), conflict),
		}, porcupine.Illegal},
		{"a save at AnyVersion does not advance by one", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(session.AnyVersion, d2), committed(5)),
		}, porcupine.Illegal},
		{"a first creation not at version 1", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(3)),
		}, porcupine.Illegal},
		{"a stale delete removes", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(1, d2), committed(2)),
			op(1, 4, 5, del(1), deleted),
		}, porcupine.Illegal},
		{"a stale delete conflicts and keeps the checkpoint", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, save(1, d2), committed(2)),
			op(1, 4, 5, del(1), conflict),
			op(1, 6, 7, loadInput, loaded(2, d2)),
		}, porcupine.Ok},
		{"a conflicting delete removed", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, del(0), conflict),
			op(2, 4, 5, del(3), conflict),
			op(1, 6, 7, loadInput, none),
		}, porcupine.Illegal},
		{"a delete at version 0 of a checkpoint that is there", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(2, 2, 3, del(0), deleted),
		}, porcupine.Illegal},
		{"a delete of none at version 0 or AnyVersion conflicts", []porcupine.Operation{
			op(1, 0, 1, del(session.AnyVersion), conflict),
		}, porcupine.Illegal},
		{"a delete of none at another version succeeds", []porcupine.Operation{
			op(1, 0, 1, del(1), deleted),
		}, porcupine.Illegal},
		{"a delete at AnyVersion removes whatever is there", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, save(1, d2), committed(2)),
			op(2, 4, 5, del(session.AnyVersion), deleted),
			op(1, 6, 7, loadInput, none),
			op(1, 8, 9, save(2, d3), conflict),
		}, porcupine.Ok},
		{"created again after a delete, at any version", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(2, 4, 5, save(0, d2), committed(3)),
			op(1, 6, 7, loadInput, loaded(3, d2)),
			op(1, 8, 9, commit(3, d3, a1), committed(4)),
		}, porcupine.Ok},
		{"created again after a delete at 1", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(2, 4, 5, save(session.AnyVersion, d2), committed(1)),
			op(1, 6, 7, save(1, d3), committed(2)),
		}, porcupine.Ok},
		{"created again after a delete, loaded at another version", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(2, 4, 5, save(0, d2), committed(3)),
			op(1, 6, 7, loadInput, loaded(1, d2)),
		}, porcupine.Illegal},
		{"a delete of the created-again checkpoint at its version", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(2, 4, 5, save(0, d2), committed(3)),
			op(1, 6, 7, del(1), deleted),
		}, porcupine.Illegal},
		{"a failed save landed late", []porcupine.Operation{
			op(1, 0, Never, save(0, d1), Output{}),
			op(2, 2, 3, loadInput, none),
			op(2, 4, 5, loadInput, loaded(1, d1)),
		}, porcupine.Ok},
		{"a failed save at another version landed", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, Never, save(3, d2), Output{}),
			op(2, 4, 5, loadInput, loaded(4, d2)),
		}, porcupine.Illegal},
		{"a failed delete at another version removed", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, Never, del(3), Output{}),
			op(2, 4, 5, loadInput, none),
		}, porcupine.Illegal},
		{"a failed delete removed, or did not", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, Never, del(1), Output{}),
			op(2, 4, 5, loadInput, loaded(1, d1)),
			op(2, 6, 7, loadInput, none),
		}, porcupine.Ok},
		{"a failed delete at AnyVersion", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, Never, del(session.AnyVersion), Output{}),
			op(2, 4, 5, save(1, d2), committed(2)),
			op(2, 6, 7, loadInput, none),
		}, porcupine.Ok},
		{"a failed creation after a delete: its version shows in a load", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, loadInput, loaded(7, d2)),
			op(2, 8, 9, save(7, d3), committed(8)),
			op(2, 10, 11, loadInput, loaded(8, d3)),
		}, porcupine.Ok},
		{"a failed creation after a delete: a conflict rules its version out", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, loadInput, loaded(5, d2)), // it landed
			op(3, 6, 7, save(2, d3), conflict),
			op(2, 8, 9, save(1, d3), conflict),
			op(2, 10, 11, loadInput, loaded(2, d2)),
		}, porcupine.Illegal},
		{"a failed creation after a delete: a save at its version", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, save(1, d3), conflict),
			op(2, 8, 9, save(4, d3), committed(5)),
			op(2, 10, 11, loadInput, loaded(5, d3)),
		}, porcupine.Ok},
		{"a failed creation after a delete: a save at a version ruled out", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, loadInput, loaded(4, d2)), // landed by now
			op(2, 8, 9, save(4, d3), conflict),
			op(2, 10, 11, save(4, d3), committed(5)),
		}, porcupine.Illegal},
		{"a failed creation after a delete: AnyVersion moves past it", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, loadInput, loaded(4, d2)),
			op(3, 8, Never, save(session.AnyVersion, d3), Output{}),
			op(2, 10, 11, loadInput, loaded(5, d3)),
		}, porcupine.Ok},
		{"a failed creation after a delete: AnyVersion past an unknown version", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, del(0), conflict), // it landed, at some version
			op(3, 8, Never, save(session.AnyVersion, d3), Output{}),
			op(2, 10, 11, loadInput, loaded(2, d3)),
		}, porcupine.Ok},
		{"a failed creation after a delete: AnyVersion past an unknown version is not 1", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, del(0), conflict),
			op(3, 8, Never, save(session.AnyVersion, d3), Output{}),
			op(2, 10, 11, loadInput, loaded(1, d3)),
		}, porcupine.Illegal},
		{"a failed creation after a delete: AnyVersion past it returns 1", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, del(0), conflict),
			op(3, 8, 9, save(session.AnyVersion, d3), committed(1)),
		}, porcupine.Illegal},
		{"a failed creation after a delete: AnyVersion past a version ruled out", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, del(0), conflict),
			op(2, 8, 9, del(4), conflict),
			op(3, 10, Never, save(session.AnyVersion, d3), Output{}),
			op(2, 12, 13, loadInput, loaded(5, d3)),
		}, porcupine.Illegal},
		{"a failed creation after a delete, deleted at its version", []porcupine.Operation{
			op(1, 0, 1, save(0, d1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(1, 4, Never, save(0, d2), Output{}),
			op(2, 6, 7, del(6), deleted),
			op(2, 8, 9, loadInput, none),
		}, porcupine.Ok},
		{"deletes keep the items", []porcupine.Operation{
			op(1, 0, 1, commit(0, d1, a1), committed(1)),
			op(1, 2, 3, del(1), deleted),
			op(2, 4, 5, items, read()),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.ops...); got != c.want {
				t.Fatalf("Check = %v, want %v\n%s", got, c.want, Explain(c.ops))
			}
		})
	}
}
