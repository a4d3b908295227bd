package runstate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// FuzzCheckpointOps drives random sequences of the public API on a
// checkpoint (its methods and assignments to every exported field) and
// checks, after each step, the writer's promise: MarshalJSON succeeds ⇒
// Load accepts the document ⇒ writing it again gives the same bytes. The
// documents WrapSaveBeforeAppend hands over inside an append are checked
// the same way.
func FuzzCheckpointOps(f *testing.F) {
	for _, seed := range propertySeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if err := runOps(ops); err != nil {
			t.Fatal(err)
		}
	})
}

// propertySeeds are op sequences covering each path: the approval flow,
// a failed registered save, a claimed batch without a session, and field
// assignments no document can hold.
var propertySeeds = [][]byte{
	{1, 1, 4, 0, 6, 1, 2, 7, 1},
	{0, 8, 1, 1, 2, 8, 1, 15, 19, 3, 9},
	{1, 1, 4, 1, 6, 0, 7, 0},
	{2, 4, 1, 5, 12, 3, 13, 1, 14, 1, 17, 0, 18, 0},
	{1, 2, 19, 2, 1, 3, 4, 2, 5, 2, 11, 1, 9, 10},
	{16, 3, 1, 4, 4, 0, 1, 3, 20, 0},
	{1, 1, 3, 2, 4, 3, 1, 2, 15, 6, 7, 3, 9},
}

// runOps interprets ops as a program on a new checkpoint and a memory
// session whose appends can be made to fail, and returns the first
// violation of the promise.
func runOps(ops []byte) error {
	ctx := context.Background()
	s := newFakeQuiet("s1")
	cp := runstate.New()
	var held []session.Item
	var saved [][]byte
	next := func(i *int) byte {
		*i++
		if *i < len(ops) {
			return ops[*i]
		}
		return 0
	}
	id := func(b byte) string { return fmt.Sprintf("c%d", b%4) }
	for i := 0; i < len(ops); i++ {
		op := ops[i] % 21
		switch op {
		case 0:
			cp.StartTurn()
		case 1:
			kinds := []runstate.StepKind{runstate.StepNone, runstate.StepInterruption, runstate.StepRunAgain, runstate.StepFinalOutput, "bogus", "next_step_handoff"}
			cp.SetStep(kinds[int(next(&i))%len(kinds)])
		case 2:
			labels := []string{"1.17", "1.15", "1.18", "1.19", "banana", ""}
			cp.Schema = labels[int(next(&i))%len(labels)]
		case 3:
			cp.Step.PendingCallIDs = append(cp.Step.PendingCallIDs, id(next(&i)))
		case 4:
			_ = cp.Park(s, []session.Item{call(id(next(&i)))}, runstate.ParkOptions{})
		case 5:
			_ = cp.ExtendHeld([]session.Item{output(id(next(&i)))})
		case 6:
			held = cp.TakeHeld()
		case 7:
			var sess session.Session = s
			if next(&i)%3 == 0 {
				sess = nil
			}
			_, _ = cp.SaveResumedTurn(ctx, sess, runstate.ResumedTurn{Items: []session.Item{output(id(next(&i)))}, Held: held})
			held = nil
		case 8:
			_, _ = cp.Save(ctx, s, runstate.SaveArgs{NewItems: []session.Item{assistant("a"), call(id(next(&i)))}, Slice: true, Register: next(&i)%2 == 0})
		case 9:
			_, _ = cp.Resume(ctx, s)
		case 10:
			cp.DiscardHeld()
		case 11:
			_ = cp.HoldResumedTurn([]session.Item{output(id(next(&i)))})
		case 12:
			cp.PersistedCount = int(next(&i)) - 3
		case 13:
			cp.Terminal = next(&i)%2 == 1
		case 14:
			if cp.Pending != nil {
				if next(&i)%2 == 0 {
					cp.Pending.Before = []string{}
				} else {
					cp.Pending.Before = []string{"x"}
				}
			}
		case 15:
			s.fault = []appendFault{failBefore, failAfter, failPartial, failReadOnce}[int(next(&i))%4]
		case 16:
			_ = cp.SetField("custom", []byte(fmt.Sprintf(`{"n":%d}`, next(&i))))
		case 17:
			if cp.Pending != nil {
				cp.Pending.Held = next(&i)%2 == 1
			}
		case 18:
			if cp.Pending != nil {
				cp.Pending.Items = cp.Pending.Items[:0]
			}
		case 19:
			durable := cp.WrapSaveBeforeAppend(s, func(doc []byte) error { saved = append(saved, doc); return nil })
			_, _ = cp.Save(ctx, durable, runstate.SaveArgs{NewItems: []session.Item{output(id(next(&i)))}, Slice: true, Register: true})
		case 20:
			cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{id(next(&i))}, Raw: []byte(`{"type":"next_step_interruption","data":{"interruptions":[{"raw_item":{"call_id":"c1","id":"fc_1"}}]}}`)}
		}
		if err := promise(cp); err != nil {
			return fmt.Errorf("after op %d (%d) of %v: %w", i, op, ops, err)
		}
		for _, doc := range saved {
			if err := promiseDoc(doc); err != nil {
				return fmt.Errorf("document saved inside an append, after op %d of %v: %w", i, ops, err)
			}
		}
		saved = saved[:0]
	}
	return nil
}

// promise checks MarshalJSON succeeds ⇒ Load accepts ⇒ same bytes again.
func promise(cp *runstate.Checkpoint) error {
	doc, err := cp.MarshalJSON()
	if err != nil {
		return nil // refused at the call: allowed
	}
	return promiseDoc(doc)
}

func promiseDoc(doc []byte) error {
	back, err := runstate.Load(doc)
	if err != nil {
		return fmt.Errorf("MarshalJSON wrote a document Load refuses: %w\n%s", err, doc)
	}
	again, err := back.MarshalJSON()
	if err != nil {
		return fmt.Errorf("a loaded document cannot be written back: %w", err)
	}
	if string(again) != string(doc) {
		return fmt.Errorf("written back differently:\n%s\n---\n%s", doc, again)
	}
	return nil
}

// TestPropertyCatchesABrokenWriter is the property's negative control:
// with MarshalJSON's checks switched off, the seed programs find a
// document Load refuses.
func TestPropertyCatchesABrokenWriter(t *testing.T) {
	for _, seed := range propertySeeds {
		if err := runOps(seed); err != nil {
			t.Fatalf("the real writer breaks the promise: %v", err)
		}
	}
	restore := runstate.BreakWriter()
	defer restore()
	caught := 0
	for _, seed := range propertySeeds {
		if runOps(seed) != nil {
			caught++
		}
	}
	if caught == 0 {
		t.Fatal("no seed caught the broken writer")
	}
	t.Logf("the broken writer is caught by %d of %d seeds", caught, len(propertySeeds))
}
