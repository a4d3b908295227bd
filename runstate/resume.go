package runstate

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// Resume settles the pending write at resume entry, before any model call
// or tool re-execution (Python's resume_pending_session_write, with the
// terminal check first):
//
//   - a terminal checkpoint fails with ErrTerminal before any Session access;
//   - no record: nothing to do;
//   - an ordinary record is recovered (semantics §3.4): ErrWriteInProgress during
//     a settle, ErrWrongSession for a nil or different session, then the
//     tail decides between appending, accepting a lost acknowledgement and
//     ErrCannotReconcile; on success cp.PersistedCount takes the record's
//     count and the slot is cleared; a session error is returned wrapped and
//     the record is kept;
//   - a held record (semantics §3.5.4) fails with ErrWrongSession for a different
//     attached session, rides untouched when detached or not run-again, and
//     otherwise settles now through Save with the parked response's id and
//     store (ordinary registration, compaction bookkeeping).
//
// Resume also forgets which outputs were folded into the held batch by an
// earlier run on this live checkpoint (see ExtendHeld).
//
// The returned SaveResult's Recovered says what Resume did: appended the
// batch, accepted a lost acknowledgement, left a held batch riding, settled
// a held batch, or nothing. It also describes a held entry settle, or the
// compaction a main-line compaction-metadata record replayed.
func (cp *Checkpoint) Resume(ctx context.Context, s session.Session) (SaveResult, error) {
	// A resume is a new run: outputs an earlier run folded are carried
	// history now, which no filter of this run may withdraw.
	cp.folded = nil
	cp.unclaim()
	if err := cp.checkResumable(); err != nil {
		return SaveResult{}, err
	}
	w := cp.Pending
	if w == nil {
		return SaveResult{}, nil
	}
	if w.Held {
		res, err := cp.settleHeldAtEntry(ctx, s)
		if err == nil {
			res.Recovered = RecoveryHeld
			if cp.Pending == nil {
				res.Recovered = RecoverySettled
			}
		}
		return res, err
	}
	if w.variant == variantCompaction {
		return cp.settleCompactionRecord(ctx, s)
	}
	appended, err := cp.settleOrdinary(ctx, s)
	if err != nil {
		return SaveResult{}, err
	}
	res := SaveResult{Recovered: RecoveryAccepted}
	if appended {
		res.Recovered = RecoveryAppended
	}
	return res, nil
}

// settleHeldAtEntry is semantics §3.5.4.
func (cp *Checkpoint) settleHeldAtEntry(ctx context.Context, s session.Session) (SaveResult, error) {
	w := cp.Pending
	if s != nil && s.SessionID() != w.SessionID {
		return SaveResult{}, ErrWrongSession
	}
	if s == nil || cp.Step.Kind != StepRunAgain {
		return SaveResult{}, nil
	}
	settling := safeToSettle(w.Items, nil, nil, nil)
	cp.Pending = nil
	if len(settling) == 0 {
		return SaveResult{}, nil
	}
	responseID, _ := w.responseID.Get()
	defer func() {
		if cp.Pending == nil || !cp.Pending.Held {
			observe(ctx, Event{Kind: EventHeldSettled, SessionID: w.SessionID, Items: len(settling)})
		}
	}()
	return cp.Save(ctx, s, SaveArgs{
		Input:        settling,
		ResponseID:   responseID,
		Store:        w.store.Ptr(),
		Slice:        true,
		Register:     true,
		settlingHeld: true,
	})
}

// settleOrdinary is the recovery algorithm of semantics §3.4, steps 3 to 11.
func (cp *Checkpoint) settleOrdinary(ctx context.Context, s session.Session) (appended bool, err error) {
	appended, err = cp.appendOrdinary(ctx, s, false)
	if err != nil {
		return false, err
	}
	cp.PersistedCount = cp.Pending.PersistedCount
	cp.Pending = nil
	return appended, nil
}

// appendOrdinary lands the ordinary record's batch exactly once: it reads
// the tail, appends when the batch has not landed, accepts a lost
// acknowledgement when it has, and refuses anything else. It reports
// whether it appended. The record stays on cp; keep says the caller keeps
// it there after a success too (otherwise the caller drops it, and the
// tail's digests are never needed).
func (cp *Checkpoint) appendOrdinary(ctx context.Context, s session.Session, keep bool) (appended bool, err error) {
	w := cp.Pending
	if cp.inProgress {
		return false, ErrWriteInProgress
	}
	if s == nil || s.SessionID() != w.SessionID {
		return false, ErrWrongSession
	}
	cp.inProgress = true
	defer func() { cp.inProgress = false }()
	defer func() {
		if keep || err != nil {
			if derr := w.digestTail(); err == nil {
				err = derr
			}
		}
	}()

	ignoreIDs := isConversation(s)
	appendIt := true
	if !w.started() && cp.atomic {
		// The append commits with the checkpoint that clears the record:
		// no state exists in which the record outlives a landed batch.
		w.prefetched = nil
	} else if !w.started() {
		// No append has started: record the tail just before appending.
		tail, ok := w.takePrefetched(len(w.Items) + 1)
		if !ok {
			var err error
			if tail, err = session.Latest(ctx, s, len(w.Items)+1); err != nil {
				return false, fmt.Errorf("runstate: read session tail: %w", err)
			}
		}
		w.tail, w.tailRead, w.tailIgnoreIDs = tail, true, ignoreIDs
	} else {
		if err := w.digestTail(); err != nil {
			return false, err
		}
		items, err := history.Digests(w.Items, ignoreIDs)
		if err != nil {
			return false, fmt.Errorf("runstate: digest pending write: %w", err)
		}
		expected := append(slices.Clone(w.Before), items...)
		tail, err := session.Latest(ctx, s, len(expected))
		if err != nil {
			return false, fmt.Errorf("runstate: read session tail: %w", err)
		}
		observed, err := history.Digests(tail, ignoreIDs)
		if err != nil {
			return false, fmt.Errorf("runstate: digest session tail: %w", err)
		}
		committed := slices.Equal(observed, expected)
		unchanged := len(observed) == 0
		if n := len(w.Before); n > 0 {
			unchanged = len(observed) >= n && slices.Equal(observed[len(observed)-n:], w.Before)
		}
		if committed == unchanged {
			observe(ctx, Event{Kind: EventRefused, SessionID: w.SessionID, Items: len(w.Items)})
			return false, ErrCannotReconcile
		}
		appendIt = unchanged
	}
	if appendIt {
		if err := session.Append(ctx, s, w.Items); err != nil {
			return false, fmt.Errorf("runstate: append pending write: %w", err)
		}
		observe(ctx, Event{Kind: EventAppended, SessionID: w.SessionID, Items: len(w.Items)})
	} else {
		observe(ctx, Event{Kind: EventLostAckAccepted, SessionID: w.SessionID, Items: len(w.Items)})
	}
	return appendIt, nil
}

// settleCompactionRecord settles a record of the 1.18 main-line
// compaction-metadata variant: the batch lands as an ordinary record (unless
// append_acknowledged says it already did), then the record's compaction
// bookkeeping runs; a failing compaction keeps the record, acknowledged, so
// the retry redoes compaction only and never re-appends.
func (cp *Checkpoint) settleCompactionRecord(ctx context.Context, s session.Session) (SaveResult, error) {
	w := cp.Pending
	ack, _ := lookup(w.extra, "append_acknowledged")
	if string(ack) != "true" {
		if _, err := cp.appendOrdinary(ctx, s, true); err != nil {
			return SaveResult{}, err
		}
		w.extra = setMember(w.extra, "append_acknowledged", []byte("true"))
	} else if s == nil || s.SessionID() != w.SessionID {
		return SaveResult{}, ErrWrongSession
	}
	raw, _ := lookup(w.extra, "response_id")
	responseID, _ := jsonString(raw)
	var store *bool
	if raw, ok := lookup(w.extra, "store"); ok {
		if b, ok := jsonBool(raw); ok {
			store = &b
		}
	}
	raw, _ = lookup(w.extra, "has_local_tool_outputs")
	local, _ := jsonBool(raw)
	c, err := compact(ctx, s, responseID, store, local)
	res := SaveResult{Compaction: c, Recovered: RecoveryAppended}
	if string(ack) == "true" {
		res.Recovered = RecoveryAccepted
	}
	if err != nil {
		return res, err
	}
	cp.PersistedCount = w.PersistedCount
	cp.Pending = nil
	return res, nil
}
