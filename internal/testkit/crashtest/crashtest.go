// Package crashtest is the crash loop of the reliability campaign: a child
// process runs an agent loop on a real store (ordinary registered saves,
// held parks and their settles), writing its checkpoint to disk at every
// step, and is killed with SIGKILL at random points; after each kill the
// parent loads the last checkpoint, resumes it on a fresh handle and checks
// that every batch is present exactly once or absent, whole, in order, with
// every call before its output.
//
// The loop writes the checkpoint durably (internal/atomicfile) after every
// change, and, through runstate's WrapSaveBeforeAppend, just before every
// append: that is the moment the pending write's "before" digests exist and
// the append has not started, so a kill at any instant leaves a checkpoint
// the recovery can reconcile.
package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/atomicfile"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// batchItems returns batch k: a call, its output, and for an ordinary save
// the assistant's message after them.
func batchItems(k int, withMessage bool) []session.Item {
	id := "b" + strconv.Itoa(k)
	out := []session.Item{
		session.MustItem(`{"type":"function_call","call_id":"` + id + `","name":"tool","arguments":"{\"k\":` + strconv.Itoa(k) + `}"}`),
		session.MustItem(`{"type":"function_call_output","call_id":"` + id + `","output":"ok ` + id + `"}`),
	}
	if withMessage {
		out = append(out, session.MustItem(`{"type":"message","role":"assistant","content":"done","batch":"`+id+`"}`))
	}
	return out
}

var batchID = regexp.MustCompile(`"b(\d+)"`)

// batchOf returns the batch number an item belongs to.
func batchOf(it session.Item) (int, bool) {
	m := batchID.FindSubmatch(it.Bytes())
	if m == nil {
		return 0, false
	}
	k, err := strconv.Atoi(string(m[1]))
	return k, err == nil
}

// load returns the checkpoint at path, or a new one when there is none.
func load(path string) (*runstate.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		cp := runstate.New()
		cp.SetStep(runstate.StepRunAgain)
		return cp, nil
	}
	if err != nil {
		return nil, err
	}
	return runstate.Load(b)
}

func save(path string, cp *runstate.Checkpoint) error {
	b, err := cp.MarshalJSON()
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b)
}

// durable persists the checkpoint at path before every append to s.
func durable(s session.Session, cp *runstate.Checkpoint, path string) session.Session {
	return cp.WrapSaveBeforeAppend(s, func(doc []byte) error { return atomicfile.Write(path, doc) })
}

// resume loads the checkpoint, settles what it holds (a held record
// settles at a run-again entry) and persists the result.
func resume(ctx context.Context, s session.Session, path string) (*runstate.Checkpoint, error) {
	cp, err := load(path)
	if err != nil {
		return nil, err
	}
	if cp.HasHeld() {
		cp.SetStep(runstate.StepRunAgain)
	}
	if _, err := cp.Resume(ctx, durable(s, cp, path)); err != nil {
		return nil, err
	}
	return cp, save(path, cp)
}

// next returns the number of the batch to write next: one past every batch
// in the session or on the checkpoint.
func next(items []session.Item, cp *runstate.Checkpoint) int {
	k := 0
	consider := func(its []session.Item) {
		for _, it := range its {
			if b, ok := batchOf(it); ok && b >= k {
				k = b + 1
			}
		}
	}
	consider(items)
	if cp.Pending != nil {
		consider(cp.Pending.Items)
	}
	return k
}

// Child runs the agent loop on s with its checkpoint at path until ctx ends
// or a step fails. ready is called once the store is open and the
// checkpoint resumed, so the parent kills a working loop.
//
// Each batch whose save returned success is then reported to acked, which
// the parent uses to count lost batches.
func Child(ctx context.Context, s session.Session, path string, seed uint64, ready func(), acked func(k int) error) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cp, err := resume(ctx, s, path)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	ready()
	ds := durable(s, cp, path)
	for ctx.Err() == nil {
		items, err := session.Latest(ctx, s, 8)
		if err != nil {
			return err
		}
		k := next(items, cp)
		if rng.IntN(3) == 0 {
			// An approval interruption under output guardrails: the turn's
			// call and output are withheld and parked on the checkpoint,
			// then a resume runs again and settles them at entry.
			cp.SetStep(runstate.StepInterruption)
			if err := cp.Park(s, batchItems(k, false), runstate.ParkOptions{}); err != nil {
				return fmt.Errorf("park %d: %w", k, err)
			}
			if err := save(path, cp); err != nil {
				return err
			}
			cp.SetStep(runstate.StepRunAgain)
			if err := save(path, cp); err != nil {
				return err
			}
			if _, err := cp.Resume(ctx, ds); err != nil {
				return fmt.Errorf("settle %d: %w", k, err)
			}
		} else {
			cp.SetStep(runstate.StepRunAgain)
			if _, err := cp.Save(ctx, ds, runstate.SaveArgs{NewItems: batchItems(k, true), Register: true}); err != nil {
				return fmt.Errorf("save %d: %w", k, err)
			}
		}
		if err := acked(k); err != nil {
			return err
		}
		if err := save(path, cp); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Report is what one verification found.
type Report struct {
	Batches     int // batches present
	Lost        int // batches acknowledged to the loop but absent
	Duplicated  int // batches present more than once
	Interleaved int // batches not whole and contiguous, or out of order
	Orphans     int // outputs without their call before them
	Refused     bool
}

// Verify resumes the checkpoint at path on s, as the next run would, and
// checks the session's history.
func Verify(ctx context.Context, s session.Session, path string, acked map[int]bool) (Report, error) {
	var r Report
	if _, err := resume(ctx, s, path); err != nil {
		if errors.Is(err, runstate.ErrCannotReconcile) {
			r.Refused = true
			return r, nil
		}
		return r, err
	}
	items, err := s.Items(ctx)
	if err != nil {
		return r, err
	}
	seen := map[int]int{}
	last := -1
	for i := 0; i < len(items); {
		k, ok := batchOf(items[i])
		if !ok {
			r.Interleaved++
			i++
			continue
		}
		n := 2
		if i+2 < len(items) {
			if k2, ok := batchOf(items[i+2]); ok && k2 == k && items[i+2].Type() == "message" {
				n = 3
			}
		}
		if i+n > len(items) {
			r.Interleaved++
			break
		}
		// Items that rode the checkpoint come back with sorted keys, so
		// compare what they are, not their bytes.
		want := batchItems(k, n == 3)
		for j := range want {
			got := items[i+j]
			if got.Type() != want[j].Type() || got.CallID() != want[j].CallID() {
				r.Interleaved++
				break
			}
			if c, ok := batchOf(got); !ok || c != k {
				r.Interleaved++
				break
			}
		}
		if k <= last {
			r.Interleaved++
		}
		last = k
		seen[k]++
		i += n
	}
	for _, c := range seen {
		r.Batches++
		if c > 1 {
			r.Duplicated += c - 1
		}
	}
	for k := range acked {
		if seen[k] == 0 {
			r.Lost++
		}
	}
	for _, p := range history.Diagnose(items) {
		if p.Kind == history.ProblemOrphanOutput {
			r.Orphans++
		}
	}
	return r, nil
}

// String is the report as one JSON line.
func (r Report) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}
