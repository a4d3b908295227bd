package linearize

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
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
