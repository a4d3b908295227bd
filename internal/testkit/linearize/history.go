package linearize

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Never is the return time of an operation that failed: it may take effect
// at any time after its call, or never.
const Never int64 = math.MaxInt64

// Op is one recorded operation.
type Op struct {
	// Client is the client that ran the operation.
	Client int `json:"c"`
	// Input and Output are what it asked and what it got.
	Input  Input  `json:"in"`
	Output Output `json:"out"`
	// Call and Return are the system-wide monotonic clock (Now) before the
	// call and after the return, in nanoseconds.
	Call   int64 `json:"t0"`
	Return int64 `json:"t1"`
	// Err is the error the operation returned, if any.
	Err string `json:"err,omitempty"`
}

// History is the operations recorded on one session, in any order.
type History []Op

// Operations returns the history as porcupine operations: a failed read is
// left out, and a failed write gets an unknown output and the return time
// Never.
func (h History) Operations() []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, len(h))
	for _, op := range h {
		o := porcupine.Operation{ClientId: op.Client, Input: op.Input, Call: op.Call, Output: op.Output, Return: op.Return}
		if op.Err != "" {
			if op.Input.Kind.read() {
				continue
			}
			o.Output = Output{Unknown: true}
			o.Return = Never
			o.Metadata = op.Err
		}
		ops = append(ops, o)
	}
	return ops
}

// Ambiguous counts the operations of ops whose outcome is unknown.
func Ambiguous(ops []porcupine.Operation) int {
	n := 0
	for _, op := range ops {
		if op.Output.(Output).Unknown {
			n++
		}
	}
	return n
}

// Check reports whether ops are linearizable under Model; Unknown means
// the check ran out of time.
func Check(ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(Model, ops, timeout)
}

// Visualize writes porcupine's HTML visualization of ops (their partial
// linearizations, and where each stops) to path.
func Visualize(ops []porcupine.Operation, path string, timeout time.Duration) error {
	_, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	return porcupine.VisualizePath(Model, info, path)
}

// checkpointWrite reports whether operations of kind k write the
// checkpoint, or conflict.
func (k Kind) checkpointWrite() bool {
	return k == Commit || k == SaveCheckpoint || k == DeleteCheckpoint
}

// read reports whether operations of kind k change nothing.
func (k Kind) read() bool { return k == Items || k == Latest || k == Follow || k == LoadCheckpoint }

func isRead(op porcupine.Operation) bool { return op.Input.(Input).Kind.read() }

// prefix returns the part of ops that a history cut at time t proves: the
// operations that returned by t, plus the writes still running at t with
// an unknown outcome. Operations called after t are left out; they cannot
// precede, in any linearization, an operation that returned by t. If the
// prefix is not linearizable, neither is ops.
func prefix(ops []porcupine.Operation, t int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		switch {
		case op.Call > t:
		case op.Return <= t:
			out = append(out, op)
		case !isRead(op):
			op.Output = Output{Unknown: true}
			op.Return = Never
			op.Metadata = "running at the cut: outcome not considered"
			out = append(out, op)
		}
	}
	return out
}

// observed returns the IDs that some output of ops shows, or that a
// cursor stands for.
func observed(ops []porcupine.Operation) map[ID]bool {
	seen := map[ID]bool{}
	for _, op := range ops {
		o := op.Output.(Output)
		for _, id := range o.Items {
			seen[id] = true
		}
		// A cursor stands for items an earlier Follow showed, which may
		// have been dropped: without their writes, the cursor would be
		// lost.
		for _, id := range op.Input.(Input).Seen {
			seen[id] = true
		}
		if o.OK && op.Input.(Input).Kind == PopItem {
			seen[o.Popped] = true
		}
	}
	return seen
}

// Minimize shrinks a history that is not linearizable to a smaller one
// that is not linearizable either, within budget, by steps that each keep
// that property:
//
//   - the shortest prefix (cut at a return time) that is not linearizable;
//   - what follows the last operation that ran alone and left the session
//     empty (a Clear, or a PopItem or read that found nothing);
//   - without each read, or Commit, SaveCheckpoint or DeleteCheckpoint
//     that reported a conflict, that the violation does not need (it
//     changes nothing, so a linearization of the whole is one of the
//     rest);
//   - without each write none of whose items any output or cursor shows,
//     when no failed PopItem might have removed one of them (such a write,
//     left out of a linearization, changes no output); an AppendOnce goes
//     with every call of its operation id (without one, a retry would
//     have to append). A Commit, SaveCheckpoint or DeleteCheckpoint that
//     did not conflict always stays: it moves the checkpoint's version,
//     which the outcome of every later one shows.
//
// Each check in it gets timeout; a reduction whose check times out is not
// taken. It returns ops unchanged if they are linearizable.
func Minimize(ops []porcupine.Operation, budget, timeout time.Duration) []porcupine.Operation {
	deadline := time.Now().Add(budget)
	illegal := func(c []porcupine.Operation) bool { return Check(c, timeout) == porcupine.Illegal }
	if !illegal(ops) {
		return ops
	}
	// The shortest illegal prefix: illegal prefixes are upward closed.
	var cuts []int64
	for _, op := range ops {
		if op.Return != Never {
			cuts = append(cuts, op.Return)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	lo, hi := 0, len(cuts) // the answer is in cuts[lo:hi], or none: ops itself
	for lo < hi && time.Now().Before(deadline) {
		mid := (lo + hi) / 2
		if illegal(prefix(ops, cuts[mid])) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if hi == len(cuts) {
		return shrink(ops, deadline, illegal)
	}
	best := shrink(prefix(ops, cuts[hi]), deadline, illegal)
	// A PopItem running at the cut becomes one that may have happened,
	// which keeps shrink from dropping writes; a later cut that no PopItem
	// straddles may shrink further.
	for _, t := range cuts[hi+1:] {
		if slices.ContainsFunc(ops, func(op porcupine.Operation) bool {
			return op.Input.(Input).Kind == PopItem && op.Call <= t && t < op.Return && op.Return != Never
		}) {
			continue
		}
		if c := shrink(prefix(ops, t), deadline, illegal); len(c) < len(best) {
			best = c
		}
		break
	}
	return best
}

// shrink drops the reads and the unobserved writes of an illegal history
// that it stays illegal without, until deadline.
func shrink(ops []porcupine.Operation, deadline time.Time, illegal func([]porcupine.Operation) bool) []porcupine.Operation {
	for changed := true; changed && time.Now().Before(deadline); {
		changed = false
		if c := sinceEmpty(ops); len(c) < len(ops) && illegal(c) {
			ops = c
		}
		// Reads and conflicts, newest first.
		for i := len(ops) - 1; i >= 0 && time.Now().Before(deadline); i-- {
			if o := ops[i].Output.(Output); !isRead(ops[i]) && (!ops[i].Input.(Input).Kind.checkpointWrite() || o.Unknown || o.OK) {
				continue
			}
			c := slices.Delete(slices.Clone(ops), i, i+1)
			if illegal(c) {
				ops, changed = c, true
			}
		}
		// Unobserved writes, when no failed PopItem could have taken one.
		if slices.ContainsFunc(ops, func(op porcupine.Operation) bool {
			return op.Input.(Input).Kind == PopItem && op.Output.(Output).Unknown
		}) {
			continue
		}
		seen := observed(ops)
		unobserved := func(op porcupine.Operation) bool {
			in := op.Input.(Input)
			return (in.Kind == AddItems || in.Kind == AppendOnce) && !slices.ContainsFunc(in.Batch, func(id ID) bool { return seen[id] })
		}
		if c := slices.DeleteFunc(slices.Clone(ops), unobserved); len(c) < len(ops) && illegal(c) {
			ops, changed = c, true
			continue
		}
		for i := len(ops) - 1; i >= 0 && time.Now().Before(deadline); i = min(i, len(ops)) - 1 {
			if !unobserved(ops[i]) {
				continue
			}
			c := slices.Delete(slices.Clone(ops), i, i+1)
			if in := ops[i].Input.(Input); in.Kind == AppendOnce {
				// All calls of the operation go together: without one, a
				// retry would have to append.
				c = slices.DeleteFunc(slices.Clone(ops), func(op porcupine.Operation) bool {
					o := op.Input.(Input)
					return o.Kind == AppendOnce && o.Op == in.Op
				})
			}
			if illegal(c) {
				ops, changed = c, true
			}
		}
	}
	return ops
}

// emptied reports whether op leaves the session without items, whatever
// came before: a Clear, or a PopItem or read that found it empty.
func emptied(op porcupine.Operation) bool {
	in, out := op.Input.(Input), op.Output.(Output)
	if out.Unknown {
		return false
	}
	switch in.Kind {
	case Clear:
		return true
	case PopItem:
		return !out.OK
	case Items:
		return len(out.Items) == 0
	case Latest:
		return in.N > 0 && len(out.Items) == 0
	case Follow:
		return in.N == 0 && !out.Lost && !out.Invalid && len(out.Items) == 0
	}
	return false
}

// sinceEmpty drops what comes before the last operation that ran alone
// (no other overlaps it) and left the session empty, and that operation:
// in any linearization, everything before it precedes it and everything
// after follows, from an empty session as at the start. A failed operation
// called before it might take effect after it, so it must have none; nor
// may across hold.
func sinceEmpty(ops []porcupine.Operation) []porcupine.Operation {
	for i := len(ops) - 1; i >= 0; i-- {
		e := ops[i]
		if !emptied(e) {
			continue
		}
		alone := true
		for j, op := range ops {
			if j != i && op.Call <= e.Return && op.Return >= e.Call || op.Return == Never && op.Call < e.Call {
				alone = false
				break
			}
		}
		if !alone || across(ops, e) {
			continue
		}
		var out []porcupine.Operation
		for _, op := range ops {
			if op.Call > e.Return {
				out = append(out, op)
			}
		}
		return out
	}
	return ops
}

// across reports whether a cut after e would separate what ops after it
// need: an operation id AppendOnce uses on both sides of e (the ids
// outlive the emptying), a checkpoint written before e (committed, saved
// or deleted: a delete lets a creation return any version) and used after
// it (it outlives the emptying too), or a Follow after e whose cursor
// stands for items written before it. (The cut is sound with the latter: the cursor is lost
// after e, as in a history that starts there, where its items were never
// written. But a counterexample with a cursor that stands for items no
// operation wrote is hard to read.)
func across(ops []porcupine.Operation, e porcupine.Operation) bool {
	before := map[int]bool{}
	after := map[ID]bool{}
	committed := false // a checkpoint write before e
	for _, op := range ops {
		in := op.Input.(Input)
		switch {
		case in.Kind == AppendOnce && op.Call <= e.Return:
			before[in.Op] = true
		case in.Kind.checkpointWrite() && op.Call <= e.Return:
			committed = true
		case (in.Kind == AddItems || in.Kind == AppendOnce || in.Kind == Commit) && op.Call > e.Return:
			for _, id := range in.Batch {
				after[id] = true
			}
		}
	}
	for _, op := range ops {
		if in := op.Input.(Input); op.Call > e.Return {
			if in.Kind == AppendOnce && before[in.Op] || in.Kind == Follow && in.N > 0 && !after[in.Last] ||
				committed && (in.Kind.checkpointWrite() || in.Kind == LoadCheckpoint) {
				return true
			}
		}
	}
	return false
}

// Explain lists ops by call time, one a line: client, call and return in
// microseconds from the first call, and the operation.
func Explain(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		if a.Call != b.Call {
			if a.Call < b.Call {
				return -1
			}
			return 1
		}
		return 0
	})
	var b strings.Builder
	if len(ops) == 0 {
		return ""
	}
	base := ops[0].Call
	for _, op := range ops {
		ret := "∞"
		if op.Return != Never {
			ret = fmt.Sprintf("%d", (op.Return-base)/1000)
		}
		fmt.Fprintf(&b, "  client %-3d [%7d, %7s] µs  %s", op.ClientId, (op.Call-base)/1000, ret, Describe(op.Input.(Input), op.Output.(Output)))
		if op.Metadata != nil {
			fmt.Fprintf(&b, "  (%v)", op.Metadata)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
