package mongo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Operation ids.
//
// An append's commit is one update of the session document (see
// "Linearizability"), so AddItemsOnce records its operation id in that
// update: _ops.<hash of the id> is set to the id, on condition that it is
// not set yet. The id is recorded if and only if the batch is committed.
//
// So that the session document stays small, recorded ids move to a
// collection of this package's own, agent_operations by default
// (Options.OperationsCollection), one document per (session, id) with a
// unique _id; the Python SDK never reads it. The next AddItemsOnce of the
// session moves them: it inserts their documents beside its own batch's
// insert, then its commit removes them from _ops and adds one to
// _ops_moved. An id is therefore recorded when it is in _ops or has its
// document (it is in both for a while, never in neither once recorded),
// and an AddItemsOnce reads _ops (in its reservation's reply) before it
// looks for the document: an id moved in between has its document by then.
// An id recorded and moved after that reading is caught by the commit's
// condition, which also requires _ops_moved to be as read. Clear, PopItem,
// replaces and expiry restarts leave both alone; RemoveSession deletes
// both. (An older Python release's clear deleted the session document,
// and with it the ids not moved yet.)
//
// Round trips: those of AddItems, the look-up and the moves running beside
// the batch's insert. An empty batch reserves nothing: it reads _ops
// (through a reservation of no seq, which creates the session document if
// there is none), looks the id up, and records it with one conditional
// update. A used id costs the reservation (and the look-up, when the id
// has moved), and undoes them.

var _ session.OnceAppender = (*Session)(nil)

// errOpDone reports an operation id already recorded: nothing appended.
var errOpDone = errors.New("the operation id is already recorded")

// onceOp is one AddItemsOnce: its id, and what the current attempt's
// look-up found.
type onceOp struct {
	st  *Store
	sid string
	id  string
	key string // _ops key: a hash of id
	// set by prepare, per attempt
	found bool     // the id's document exists: recorded
	moved []string // the _ops keys whose documents this attempt inserted
}

func newOnceOp(st *Store, sid, id string) *onceOp {
	h := sha256.Sum256([]byte(id))
	return &onceOp{st: st, sid: sid, id: id, key: hex.EncodeToString(h[:16])}
}

// opDocID is the _id of the document of operation id op of session sid
// (the length first, so that no two pairs share it).
func opDocID(sid, op string) string {
	return strconv.Itoa(len(sid)) + ":" + sid + ":" + op
}

// recorded reports whether sd lists the id in _ops.
func (o *onceOp) recorded(sd *sessionDoc) bool { return listed(sd.Ops, o.key) }

// stillOpen reports whether cur, read after sd, still lets the commit
// prepared from sd apply: the id is not recorded and nothing was moved.
func (o *onceOp) stillOpen(sd, cur *sessionDoc) bool {
	return !o.recorded(cur) && cur.OpsMoved == sd.OpsMoved
}

// prepare looks the id's document up and inserts the documents of the
// other ids sd lists in _ops, concurrently. A failure to move them is not
// one of the call: they stay in _ops, and the next AddItemsOnce moves them.
func (o *onceOp) prepare(ctx context.Context, sd *sessionDoc) error {
	o.found, o.moved = false, nil
	var leftover []string
	var docs []any
	if sd.Ops != nil {
		elems, err := sd.Ops.Elements()
		if err == nil {
			now := o.st.now()
			for _, e := range elems {
				id, ok := e.Value().StringValueOK()
				if !ok || e.Key() == o.key {
					continue
				}
				leftover = append(leftover, e.Key())
				docs = append(docs, bson.D{
					{Key: "_id", Value: opDocID(o.sid, id)},
					{Key: fSessionID, Value: o.sid},
					{Key: "operation_id", Value: id},
					{Key: fCreatedAt, Value: now},
				})
			}
		}
	}
	var wg sync.WaitGroup
	if len(docs) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := o.st.operations.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
			if err == nil || onlyDuplicates(err) {
				o.moved = leftover
			}
		}()
	}
	err := o.st.operations.FindOne(ctx, bson.D{{Key: "_id", Value: opDocID(o.sid, o.id)}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	wg.Wait()
	switch {
	case err == nil:
		o.found = true
	case !errors.Is(err, mongodrv.ErrNoDocuments):
		return fmt.Errorf("look the operation id up: %w", err)
	}
	return nil
}

// onlyDuplicates reports whether every write error of a bulk insert is a
// duplicate key (the document is there already).
func onlyDuplicates(err error) bool {
	var bwe mongodrv.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return false
		}
	}
	return true
}

// commitClauses adds to a commit's filter and update what records the id:
// the id not recorded and nothing moved since sd; set _ops.<key>, unset
// the moved keys and count the move.
func (o *onceOp) commitClauses(sd *sessionDoc, filter, set, unset, update bson.D) (bson.D, bson.D, bson.D, bson.D) {
	filter = append(filter,
		bson.E{Key: fOps + "." + o.key, Value: bson.D{{Key: "$exists", Value: false}}},
		zeroOrMissing(fOpsMoved, sd.OpsMoved))
	set = append(set, bson.E{Key: fOps + "." + o.key, Value: o.id})
	for _, k := range o.moved {
		unset = append(unset, bson.E{Key: fOps + "." + k, Value: ""})
	}
	if len(o.moved) > 0 {
		update = append(update, bson.E{Key: "$inc", Value: bson.D{{Key: fOpsMoved, Value: int64(1)}}})
	}
	return filter, set, unset, update
}

// insertBatchDoc inserts an append's batch document and, with op,
// prepares op beside it.
func (s *Session) insertBatchDoc(ctx context.Context, raw bson.Raw, sd *sessionDoc, op *onceOp) error {
	var prepErr error
	var wg sync.WaitGroup
	if op != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prepErr = op.prepare(ctx, sd)
		}()
	}
	_, err := s.st.messages.InsertOne(ctx, raw)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("insert a message document: %w", err)
	}
	return prepErr
}

// discard deletes an append's batch document that will not be committed,
// then its reservation.
func (s *Session) discard(ctx context.Context, id bson.ObjectID) {
	cctx, cancel := cleanupContext(ctx)
	_, derr := s.st.messages.DeleteOne(cctx, bson.D{{Key: "_id", Value: id}, byID(s.id)})
	cancel()
	if derr == nil {
		s.dropReservation(ctx, id)
	}
}

// AddItemsOnce appends items as one atomic batch, as AddItems does, unless
// a batch with opID was already appended to the session, and reports
// whether this call appended. The id is recorded by the batch's commit;
// an empty batch records it alone. An empty opID is
// session.ErrInvalidOperationID. A commit whose outcome is unknown
// (session.ErrOutcomeUnknown) may have recorded the id: calling again
// with it tells.
func (s *Session) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	if opID == "" {
		return false, session.ErrInvalidOperationID
	}
	if err := driver.ValidateBatch(items); err != nil {
		return false, err
	}
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if len(items) > 0 {
		if err := s.st.checkBatchSize(s.id, items); err != nil {
			return false, err
		}
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return false, fmt.Errorf("mongo: add items once: %w", err)
	}
	if err := s.st.ensureOpsIndex(ctx); err != nil {
		return false, fmt.Errorf("mongo: add items once: %w", err)
	}
	op := newOnceOp(s.st, s.id, opID)
	if len(items) == 0 {
		ok, err := s.recordOnce(ctx, op)
		if err != nil {
			return false, fmt.Errorf("mongo: add items once: %w", err)
		}
		return ok, nil
	}
	sd, now, err := s.appendBatch(ctx, items, op)
	if errors.Is(err, errOpDone) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mongo: add items once: %w", err)
	}
	s.st.est.observe(len(items), 1)
	s.afterWrite(ctx, sd, now)
	return true, nil
}

// recordOnce records op's id with no batch: one conditional update of the
// session document, after a reservation of no seq and the look-up.
func (s *Session) recordOnce(ctx context.Context, op *onceOp) (bool, error) {
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		sd, _, err := s.reserve(ctx, 0)
		if err != nil {
			return false, err
		}
		if op.recorded(sd) {
			return false, nil
		}
		if err := op.prepare(ctx, sd); err != nil {
			return false, err
		}
		if op.found {
			return false, nil
		}
		filter, set, unset, update := op.commitClauses(sd, bson.D{byID(s.id)}, nil, nil, nil)
		update = append(update, bson.E{Key: "$set", Value: set})
		if len(unset) > 0 {
			update = append(update, bson.E{Key: "$unset", Value: unset})
		}
		res, err := s.st.sessions.UpdateOne(ctx, filter, update)
		if err != nil {
			return false, fmt.Errorf("record the operation id: %w", committing(err))
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return false, err
		}
	}
	return false, errCommitLost
}

// testHookBeforeOnceCommit, when set by a test, runs between an
// AddItemsOnce's look-up and its commit.
var testHookBeforeOnceCommit func(s *Session)

// ensureOpsIndex creates the operations collection's {session_id} index
// (RemoveSession deletes by it) once per Store.
func (st *Store) ensureOpsIndex(ctx context.Context) error {
	st.idxMu.Lock()
	done := st.opsIdxDone
	st.idxMu.Unlock()
	if done {
		return nil
	}
	indexMu.Lock()
	defer indexMu.Unlock()
	return st.createOpsIndex(ctx)
}

// createOpsIndex makes the operations index; the caller holds indexMu.
// ensureIndexes makes it with the others, so that a store's first use
// creates every collection and index the adapter has.
func (st *Store) createOpsIndex(ctx context.Context) error {
	if err := retryNetwork(ctx, func() error {
		_, err := st.operations.Indexes().CreateOne(ctx, mongodrv.IndexModel{Keys: bson.D{{Key: fSessionID, Value: 1}}})
		return err
	}); err != nil {
		return fmt.Errorf("create the operations' {session_id} index: %w", err)
	}
	st.idxMu.Lock()
	st.opsIdxDone = true
	st.idxMu.Unlock()
	return nil
}
