package runstate

import "slices"

// NextKind says what an agent loop must do next with a run.
type NextKind string

// The next steps, in the order a loop meets them.
const (
	// NextInput: no run is in progress; give the next run its input.
	NextInput NextKind = "input"
	// NextModel: call the model; Next.ResponseID is the previous response
	// ("" when there is none, as after Input).
	NextModel NextKind = "model"
	// NextApproval: calls await a human's approval (Next.CallIDs); once
	// approved, Claim each before running its tool, then record its
	// Output (a rejection needs no claim).
	NextApproval NextKind = "approval"
	// NextOutput: tools this Run claimed are running (Next.CallIDs);
	// record their outputs.
	NextOutput NextKind = "output"
	// NextResolve: claimed calls are in doubt (Next.CallIDs): their tools
	// may have run. Resolve each with Output, Reclaim or Abandon.
	NextResolve NextKind = "resolve"
	// NextSettle: every awaited call is answered; Settle the turn.
	NextSettle NextKind = "settle"
	// NextRecover: a batch is pending (a process died mid-append); the
	// next Open lands it. A Run never reports it.
	NextRecover NextKind = "recover"
	// NextTerminal: the checkpoint must not resume (it died mid-settle of
	// a final output); repair it. A Run never reports it (Open fails).
	NextTerminal NextKind = "terminal"
	// NextDone: Finish ended the run.
	NextDone NextKind = "done"
)

// Next is what a loop must do next with a run: its kind, and the calls or
// the response it concerns.
type Next struct {
	Kind NextKind
	// CallIDs are the calls awaiting approval (NextApproval), running
	// (NextOutput) or in doubt (NextResolve), in the order they await.
	CallIDs []string
	// ResponseID is the previous response, for NextModel (its
	// previous_response_id); "" when there is none.
	ResponseID string
}

// Next says what a loop must do next with the run.
func (r *Run) Next() Next {
	if r.done {
		return Next{Kind: NextDone}
	}
	return r.cp.next(r.mine)
}

// Next says what a process that loads this checkpoint must do next with
// its run: every claim on it is in doubt (the process that made it is not
// the one that loaded it).
func (cp *Checkpoint) Next() Next { return cp.next(nil) }

func (cp *Checkpoint) next(mine map[string]string) Next {
	awaiting, running, inDoubt := cp.split(mine)
	switch {
	case cp.Terminal:
		return Next{Kind: NextTerminal}
	case len(inDoubt) > 0:
		return Next{Kind: NextResolve, CallIDs: inDoubt}
	case len(awaiting) > 0:
		return Next{Kind: NextApproval, CallIDs: awaiting}
	case len(running) > 0:
		return Next{Kind: NextOutput, CallIDs: running}
	case cp.Pending != nil && !cp.Pending.Held:
		return Next{Kind: NextRecover}
	case cp.HasHeld() || cp.claimed != nil || cp.run.TurnOpen:
		return Next{Kind: NextSettle}
	case cp.Step.Kind == StepRunAgain:
		return Next{Kind: NextModel, ResponseID: cp.run.ResponseID}
	}
	return Next{Kind: NextInput}
}

// split sorts the calls still awaited into those awaiting approval (not
// claimed), those claimed by mine (call id → claim token), and those
// claimed by anyone else.
func (cp *Checkpoint) split(mine map[string]string) (awaiting, running, inDoubt []string) {
	for _, id := range cp.pendingIDs() {
		switch c, claimed := cp.run.Claims[id]; {
		case !claimed:
			awaiting = append(awaiting, id)
		case mine[id] != "" && mine[id] == c.Token:
			running = append(running, id)
		default:
			inDoubt = append(inDoubt, id)
		}
	}
	return slices.Clip(awaiting), slices.Clip(running), slices.Clip(inDoubt)
}

// Idle reports whether doc is the checkpoint of a run with nothing in
// progress (what Finish leaves: Next is NextInput): a store holding it, or
// none, holds no run to resume.
func Idle(doc []byte) bool {
	cp, err := Load(doc)
	return err == nil && cp.Next().Kind == NextInput
}
