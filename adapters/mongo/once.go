package mongo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

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
// Round trips: those of AddItems, the look-up, the moves and the claim
// (see "Claims") running beside the batch's insert, then the decision. An
// empty batch reserves nothing: it reads _ops (through a reservation of no
// seq, which creates the session document if there is none), looks the id
// up, claims it, records it with one conditional update and inserts the
// decision. A used id costs the reservation (and the look-up, when the id
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
	// set by claim, per attempt
	owner   string // the owner this attempt's claim names
	claimed bool   // this attempt's claim insert got in: it holds the claim
	unsure  bool   // this attempt's claim insert failed: it may have got in
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

// insertBatchDoc inserts an append's batch document (reserved as id)
// and, with op, prepares op and inserts its claim, owned by id, beside it.
func (s *Session) insertBatchDoc(ctx context.Context, raw bson.Raw, id bson.ObjectID, sd *sessionDoc, op *onceOp) error {
	var prepErr, claimErr error
	var wg sync.WaitGroup
	if op != nil {
		wg.Add(2)
		go func() {
			defer wg.Done()
			prepErr = op.prepare(ctx, sd)
		}()
		go func() {
			defer wg.Done()
			claimErr = op.claim(ctx, id.Hex(), true)
		}()
	}
	_, err := s.st.messages.InsertOne(ctx, raw)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("insert a message document: %w", err)
	}
	if prepErr != nil {
		return prepErr
	}
	return claimErr
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
func (s *Session) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (_ bool, err error) {
	defer refusedID(&err, s.id, "")
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
	ok, err := op.decide(ctx)
	if err != nil {
		return false, fmt.Errorf("mongo: add items once: %w", err)
	}
	return ok, nil
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
		if err := op.claim(ctx, bson.NewObjectID().Hex(), false); err != nil {
			op.release(ctx)
			return false, err
		}
		if !op.claimed {
			if err := op.awaitClaim(ctx, s); err != nil {
				if errors.Is(err, errOpDone) {
					return false, nil
				}
				return false, err
			}
			if err := backoff(ctx, attempt); err != nil {
				return false, err
			}
			continue
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
			return op.decide(ctx)
		}
		op.release(ctx)
		if err := backoff(ctx, attempt); err != nil {
			return false, err
		}
	}
	return false, errCommitLost
}

// Claims.
//
// The commit's condition (_ops.<key> not set yet) decides between two
// concurrent calls with one id only where single-document updates are
// atomic: on a server that runs a conditional update as a read and a
// write (FerretDB v1 without a write serializer), both commits can match
// and both calls would answer true. So the answer is decided by an insert
// as well: before its commit, each attempt inserts the id's claim, a
// document of the operations collection with the unique _id
// "claim:<operation document _id>" (an operation document's _id starts
// with a digit, so the two never meet), naming its owner. Of concurrent
// inserts the unique _id lets exactly one in, on every server that
// enforces it; only the call holding the claim commits, so only it can
// answer true. The other gives its attempt up (deleting its batch and its
// reservation) and waits until the claim is settled: it answers false
// once the id is recorded, and tries again once the holder can no longer
// record it.
//
// An append's claim is owned by its reservation (its _id in _resv): the
// commit that records the id needs the reservation still listed and
// removes it in the same update, so a holder whose reservation is no
// longer listed, while the id is not recorded, never will record it, and
// its claim is deleted (on condition that it still names that owner). A
// holder's reservation older than staleReservation is abandoned first, as
// a later append would abandon it. An empty batch's claim (recordOnce)
// names a token of its own and lapses after staleReservation. A holder
// that commits keeps its claim (the id is recorded; RemoveSession deletes
// claims with the other operation documents); one that does not deletes
// its own, except after a commit of unknown outcome, whose claim lapses
// as above.
//
// The deletion of a lapsed claim rests on reading the session document,
// which a server without atomic updates can get wrong: there a commit can
// be lost to a concurrent write after its call answered, and the claim
// taken over. So a call whose commit applied answers true only once it
// has inserted the id's decision, a third document with the unique _id
// "decided:<operation document _id>": of two calls that both committed,
// the second answers false. On MongoDB (and FerretDB behind a write
// serializer) the second commit never applies, and the decision only
// costs the round trip.

// claimDocID is the _id of the claim of operation id op of session sid.
func claimDocID(sid, op string) string { return "claim:" + opDocID(sid, op) }

// decisionDocID is the _id of the decision of operation id op of session
// sid.
func decisionDocID(sid, op string) string { return "decided:" + opDocID(sid, op) }

// decide inserts the id's decision, once this call's commit has recorded
// the id, and reports whether it got in: the call answers true if and
// only if it did. Where single-document updates are atomic a second
// commit recording the id never applies, so the insert always gets in;
// where they are not, it is what keeps a second true answer out (the
// batch of a call answering false may then have been committed too). A
// failed insert leaves the answer unknown; the id is recorded, so calling
// again answers false.
func (o *onceOp) decide(ctx context.Context) (bool, error) {
	_, err := o.st.operations.InsertOne(ctx, bson.D{
		{Key: "_id", Value: decisionDocID(o.sid, o.id)},
		{Key: fSessionID, Value: o.sid},
		{Key: "operation_id", Value: o.id},
		{Key: fCreatedAt, Value: o.st.now()},
	})
	switch {
	case err == nil:
		return true, nil
	case mongodrv.IsDuplicateKeyError(err):
		return false, nil
	}
	return false, fmt.Errorf("record the operation id's decision: %w", &outcomeUnknown{err})
}

// claimDoc is a claim as read.
type claimDoc struct {
	Owner   string    `bson:"owner"`
	Resv    bool      `bson:"resv"`
	Created time.Time `bson:"created_at"`
}

// claim inserts the id's claim, naming owner (resv: owner is the
// attempt's reservation id) and sets o.claimed when it got in. A claim
// already there is no error: o.claimed stays false.
func (o *onceOp) claim(ctx context.Context, owner string, resv bool) error {
	o.owner, o.claimed, o.unsure = owner, false, false
	_, err := o.st.operations.InsertOne(ctx, bson.D{
		{Key: "_id", Value: claimDocID(o.sid, o.id)},
		{Key: fSessionID, Value: o.sid},
		{Key: "operation_id", Value: o.id},
		{Key: "owner", Value: owner},
		{Key: "resv", Value: resv},
		{Key: fCreatedAt, Value: o.st.now()},
	})
	switch {
	case err == nil:
		o.claimed = true
		return nil
	case mongodrv.IsDuplicateKeyError(err):
		return nil
	}
	o.unsure = true
	return fmt.Errorf("claim the operation id: %w", err)
}

// release deletes this attempt's claim, if it holds it or may (an
// insert whose reply was lost may have landed).
func (o *onceOp) release(ctx context.Context) {
	if !o.claimed && !o.unsure {
		return
	}
	cctx, cancel := cleanupContext(ctx)
	_, _ = o.st.operations.DeleteOne(cctx, bson.D{
		{Key: "_id", Value: claimDocID(o.sid, o.id)}, {Key: "owner", Value: o.owner}})
	cancel()
	o.owner, o.claimed, o.unsure = "", false, false
}

// awaitClaim waits until the claim another call holds is settled. It
// returns errOpDone once the id is recorded, and nil once the claim is
// gone or was deleted because its holder can no longer record the id
// (the caller then tries again).
func (o *onceOp) awaitClaim(ctx context.Context, s *Session) error {
	o.owner, o.claimed, o.unsure = "", false, false
	key := bson.D{{Key: "_id", Value: claimDocID(o.sid, o.id)}}
	for tries := 0; ; tries++ {
		var c claimDoc
		err := o.st.operations.FindOne(ctx, key).Decode(&c)
		if errors.Is(err, mongodrv.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the operation id's claim: %w", err)
		}
		// The session document, then the operation document: an id
		// moved out of _ops in between has its document by then.
		cur, err := s.loadSession(ctx)
		if err != nil {
			return err
		}
		if cur != nil && o.recorded(cur) {
			return errOpDone
		}
		err = o.st.operations.FindOne(ctx, bson.D{{Key: "_id", Value: opDocID(o.sid, o.id)}},
			options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if err == nil {
			return errOpDone
		}
		if !errors.Is(err, mongodrv.ErrNoDocuments) {
			return fmt.Errorf("look the operation id up: %w", err)
		}
		now := o.st.now()
		live := now.Sub(c.Created) <= staleReservation
		if c.Resv {
			live = false
			if cur != nil && cur.Resv != nil {
				if v, err := cur.Resv.LookupErr(c.Owner); err == nil {
					live = true
					if t, ok := v.TimeOK(); ok && now.Sub(t) > staleReservation {
						// The holder most likely died before its commit:
						// abandon its reservation (so it can no longer
						// commit), then look again.
						s.abandonReservation(ctx, c.Owner)
						continue
					}
				}
			}
		}
		if !live {
			cctx, cancel := cleanupContext(ctx)
			_, err := o.st.operations.DeleteOne(cctx, append(key, bson.E{Key: "owner", Value: c.Owner}))
			cancel()
			if err != nil {
				return fmt.Errorf("delete a lapsed claim of the operation id: %w", err)
			}
			return nil
		}
		if err := pollWait(ctx, tries); err != nil {
			return err
		}
	}
}

// abandonReservation moves reservation key (an append's _id in hex) to
// _abandoned, if it is still listed: its batch can no longer be committed.
func (s *Session) abandonReservation(ctx context.Context, key string) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, _ = s.st.sessions.UpdateOne(cctx,
		bson.D{byID(s.id), {Key: fResv + "." + key, Value: bson.D{{Key: "$exists", Value: true}}}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: fAbandoned + "." + key, Value: true}}},
			{Key: "$unset", Value: bson.D{{Key: fResv + "." + key, Value: ""}}},
		})
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
