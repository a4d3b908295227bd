package mongo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
)

// maxCommitAttempts bounds how often an append reserves again after its
// commit lost to a batch reserved later and committed first, or to a
// transition.
const maxCommitAttempts = 64

// staleReservation is how long an append waits for the appends reserved
// before it to commit; it then commits anyway, abandoning them (their
// writers most likely died between reservation and commit).
const staleReservation = 2 * time.Second

// deadReservation is the age at which the next append abandons a
// reservation still listed, even if no append waits for it.
const deadReservation = 30 * time.Second

// errCommitLost reports an append whose commits kept losing.
var errCommitLost = errors.New("commit a batch: lost too many races with concurrent appends or transitions")

// appendBatch is AddItems after its checks: reserve a seq (listing the
// reservation in _resv), insert the batch (_c: 1, which no reader shows
// before its commit), then commit it on the session document once the
// appends reserved before it have committed (see "Linearizability" in the
// package documentation).
//
// With op (AddItemsOnce), the batch is appended only if op's id is not
// recorded yet, and its commit records it (see once.go); errOpDone reports
// an id already recorded, and nothing appended.
func (s *Session) appendBatch(ctx context.Context, items []session.Item, op *onceOp) (*sessionDoc, time.Time, error) {
	unlock, err := s.st.appends.lock(ctx, s.id)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer unlock()
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		id := bson.NewObjectID()
		sd, now, err := s.reserveAs(ctx, int64(len(items)), id)
		if err != nil {
			return nil, now, err
		}
		if op != nil && op.recorded(sd) {
			s.dropReservation(ctx, id)
			return nil, now, errOpDone
		}
		s.abandonDead(ctx, sd, now)
		if h := testHookAfterReserve; h != nil {
			h(s, sd.batchSeq())
		}
		exp, err := s.stampFor(ctx, sd, now)
		if err != nil {
			s.dropReservation(ctx, id)
			return nil, now, err
		}
		doc := batchDoc{
			id: id, session: s.id, seq: sd.batchSeq(), gen: sd.Generation,
			items: items, created: now, expires: exp, commit: 1,
		}
		raw, err := doc.marshal()
		if err != nil {
			s.dropReservation(ctx, id)
			return nil, now, err
		}
		if err := s.insertBatchDoc(ctx, raw, id, sd, op); err != nil {
			// Whether it landed or not, it is listed as reserved: hidden.
			if op != nil {
				op.release(ctx)
			}
			return nil, now, err
		}
		if op != nil && op.found {
			s.discard(ctx, id)
			op.release(ctx)
			return nil, now, errOpDone
		}
		if op != nil && !op.claimed {
			// Another call holds the id's claim (see "Claims" in once.go):
			// give this attempt up, wait until that call has recorded the
			// id or can no longer, and try again.
			s.discard(ctx, id)
			if err := op.awaitClaim(ctx, s); err != nil {
				return nil, now, err
			}
			if err := backoff(ctx, attempt); err != nil {
				return nil, now, err
			}
			continue
		}
		if h := testHookBeforeOnceCommit; h != nil && op != nil {
			h(s)
		}
		ok, err := s.commitInOrder(ctx, sd, id, now, op)
		if err != nil {
			// Unknown outcome: the commit may have been applied. Leave the
			// document: it is visible if and only if it was committed.
			return nil, now, fmt.Errorf("commit the batch: %w", err)
		}
		if !ok {
			// A later batch committed first, or a transition, or this
			// reservation was abandoned: the batch would land below what a
			// reader may have seen. Delete it (then its reservation) and
			// reserve again.
			s.discard(ctx, id)
			if op != nil {
				op.release(ctx)
			}
			if err := backoff(ctx, attempt); err != nil {
				return nil, now, err
			}
			continue
		}
		return sd, now, nil
	}
	return nil, time.Time{}, errCommitLost
}

// appendLocks runs the appends of one Store to one session one at a time:
// each would wait for the commits of those reserved before it anyway (see
// commitInOrder), and waiting in the process costs no round trip, where
// a reservation waiting on the server keeps every later one waiting too.
type appendLocks struct {
	mu    sync.Mutex
	locks map[string]*appendLock
}

type appendLock struct {
	held chan struct{} // holds one token while an append runs
	refs int           // guarded by appendLocks.mu
}

// lock takes the append lock of session id, or returns the context's
// error, and returns its release.
func (a *appendLocks) lock(ctx context.Context, id string) (func(), error) {
	a.mu.Lock()
	if a.locks == nil {
		a.locks = map[string]*appendLock{}
	}
	l := a.locks[id]
	if l == nil {
		l = &appendLock{held: make(chan struct{}, 1)}
		a.locks[id] = l
	}
	l.refs++
	a.mu.Unlock()
	deref := func() {
		a.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(a.locks, id)
		}
		a.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; deref() }, nil
	case <-ctx.Done():
		deref()
		return nil, ctx.Err()
	}
}

// predecessors returns the appends reserved before the one sd's
// reservation made (they were listed when it applied), except itself and
// those older than staleReservation.
func predecessors(sd *sessionDoc, self bson.ObjectID, now time.Time) []string {
	if sd.Resv == nil {
		return nil
	}
	elems, err := sd.Resv.Elements()
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range elems {
		if e.Key() == self.Hex() {
			continue
		}
		if t, ok := e.Value().TimeOK(); ok && now.Sub(t) > staleReservation {
			continue
		}
		out = append(out, e.Key())
	}
	return out
}

// commitInOrder commits the batch reserved by sd's update once the appends
// reserved before it have committed or given up, so that commits land in
// seq order and a commit is rarely lost; after staleReservation it commits
// anyway, abandoning those still listed. It reports false when the commit
// can no longer apply: a batch above it was committed, the generation
// changed, or its own reservation was abandoned.
func (s *Session) commitInOrder(ctx context.Context, sd *sessionDoc, id bson.ObjectID, now time.Time, op *onceOp) (bool, error) {
	wait := predecessors(sd, id, now)
	deadline := now.Add(staleReservation)
	var abandon []string
	for tries := 0; ; tries++ {
		if len(wait) == 0 || len(abandon) > 0 {
			ok, err := s.commitBatch(ctx, sd, id, wait, abandon, op)
			if err != nil || ok {
				return ok, err
			}
		} else if err := pollWait(ctx, tries); err != nil {
			return false, err
		}
		cur, err := s.loadSession(ctx)
		if err != nil {
			return false, err
		}
		if cur == nil || cur.Generation != sd.Generation || cur.Top >= sd.batchSeq() || !listed(cur.Resv, id.Hex()) {
			return false, nil
		}
		if op != nil && !op.stillOpen(sd, cur) {
			return false, nil
		}
		var still []string
		for _, p := range wait {
			if listed(cur.Resv, p) {
				still = append(still, p)
			}
		}
		wait, abandon = still, nil
		if len(wait) > 0 && !s.st.now().Before(deadline) {
			wait, abandon = nil, still
		}
	}
}

// pollWait waits a little before an append looks again whether the
// appends reserved before it have committed: a quarter of a millisecond,
// more after each look, at most two milliseconds, with jitter. (Each look
// is a read; the wait is for another writer's two round trips.)
func pollWait(ctx context.Context, tries int) error {
	d := time.Duration(min(tries+1, 8)) * 250 * time.Microsecond
	d += time.Duration(rand.Int64N(int64(d)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commitBatch commits the batch document id reserved by sd's update: one
// update of the session document, applied only if the generation is still
// sd's, no batch at or above this one's seq was committed, its reservation
// is still listed, none in wait is and all in abandon are. It sets _top to
// the batch's seq, drops its reservation and moves those in abandon to
// _abandoned. It reports whether it applied.
func (s *Session) commitBatch(ctx context.Context, sd *sessionDoc, id bson.ObjectID, wait, abandon []string, op *onceOp) (bool, error) {
	seq := sd.batchSeq()
	filter := bson.D{
		byID(s.id),
		generationIs(fGeneration, sd.Generation),
		{Key: "$or", Value: bson.A{
			bson.D{{Key: fTop, Value: bson.D{{Key: "$lt", Value: seq}}}},
			bson.D{{Key: fTop, Value: nil}},
		}},
		{Key: fResv + "." + id.Hex(), Value: bson.D{{Key: "$exists", Value: true}}},
	}
	for _, p := range wait {
		filter = append(filter, bson.E{Key: fResv + "." + p, Value: bson.D{{Key: "$exists", Value: false}}})
	}
	set := bson.D{{Key: fTop, Value: seq}}
	unset := bson.D{{Key: fResv + "." + id.Hex(), Value: ""}}
	for _, p := range abandon {
		filter = append(filter, bson.E{Key: fResv + "." + p, Value: bson.D{{Key: "$exists", Value: true}}})
		set = append(set, bson.E{Key: fAbandoned + "." + p, Value: true})
		unset = append(unset, bson.E{Key: fResv + "." + p, Value: ""})
	}
	update := bson.D{}
	if op != nil {
		filter, set, unset, update = op.commitClauses(sd, filter, set, unset, update)
	}
	update = append(update, bson.E{Key: "$set", Value: set}, bson.E{Key: "$unset", Value: unset})
	res, err := s.st.sessions.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, committing(err)
	}
	return res.MatchedCount == 1, nil
}

// dropReservation removes an append's reservation (and its abandonment)
// once its batch document is known not to exist.
func (s *Session) dropReservation(ctx context.Context, id bson.ObjectID) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, _ = s.st.sessions.UpdateOne(cctx, bson.D{byID(s.id)},
		bson.D{{Key: "$unset", Value: bson.D{{Key: fResv + "." + id.Hex(), Value: ""}, {Key: fAbandoned + "." + id.Hex(), Value: ""}}}})
}

// abandonDead moves the reservations sd lists that are older than
// deadReservation to _abandoned, each only if still listed (a commit may
// have just dropped it).
func (s *Session) abandonDead(ctx context.Context, sd *sessionDoc, now time.Time) {
	if sd.Resv == nil {
		return
	}
	elems, err := sd.Resv.Elements()
	if err != nil {
		return
	}
	for _, e := range elems {
		t, ok := e.Value().TimeOK()
		if !ok || now.Sub(t) <= deadReservation {
			continue
		}
		cctx, cancel := cleanupContext(ctx)
		_, _ = s.st.sessions.UpdateOne(cctx,
			bson.D{byID(s.id), {Key: fResv + "." + e.Key(), Value: bson.D{{Key: "$exists", Value: true}}}},
			bson.D{
				{Key: "$set", Value: bson.D{{Key: fAbandoned + "." + e.Key(), Value: true}}},
				{Key: "$unset", Value: bson.D{{Key: fResv + "." + e.Key(), Value: ""}}},
			})
		cancel()
	}
}

// view returns the documents of docs that sd makes visible, newest first:
// every document without _c (the Python SDK's, a replace's batch, a
// marker); an append's batch once committed as of sd (see
// sessionDoc.committed); and, when sd's last pop may not be applied yet,
// the document it names without the record it took.
func view(docs []messageDoc, sd *sessionDoc) []messageDoc {
	out := docs[:0:0]
	for _, d := range docs {
		if d.commit != 0 && (!d.hasSeq || !sd.committed(d.id, d.seq)) {
			continue
		}
		if p := sd.Popping; p != nil && p.G == sd.Generation && d.inGeneration(p.G) &&
			sameValue(d.id, p.ID) && int64(d.records()) == p.N {
			if !d.isArray() {
				continue
			}
			if p.J >= 0 && int(p.J) < len(d.vals) {
				d.vals = slices.Delete(slices.Clone(d.vals), int(p.J), int(p.J)+1)
			}
		}
		out = append(out, d)
	}
	return out
}

// sameValue reports whether two BSON values are the same bytes.
func sameValue(a, b bson.RawValue) bool {
	return a.Type == b.Type && bytes.Equal(a.Value, b.Value)
}

// commitPop commits the pop of record j of d, chosen from the view of sd:
// one update of the session document, applied only if nothing was
// committed since sd was read (generation, _top and _pops unchanged). It
// records the pop in _popping, replacing the previous one, which the
// caller has applied. It reports whether it applied.
func (s *Session) commitPop(ctx context.Context, sd *sessionDoc, d *messageDoc, j int) (bool, error) {
	intent := bson.D{
		{Key: "id", Value: d.id},
		{Key: "j", Value: int64(j)},
		{Key: "n", Value: int64(d.records())},
		{Key: "g", Value: sd.Generation},
	}
	res, err := s.st.sessions.UpdateOne(ctx,
		bson.D{
			byID(s.id),
			generationIs(fGeneration, sd.Generation),
			zeroOrMissing(fTop, sd.Top),
			zeroOrMissing(fPops, sd.Pops),
		},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: fPopping, Value: intent}}},
			{Key: "$inc", Value: bson.D{{Key: fPops, Value: int64(1)}}},
		})
	if err != nil {
		return false, fmt.Errorf("commit the pop: %w", committing(err))
	}
	return res.MatchedCount == 1, nil
}

// zeroOrMissing matches field equal to v, or missing or null when v is 0.
func zeroOrMissing(field string, v int64) bson.E {
	if v == 0 {
		return bson.E{Key: field, Value: bson.D{{Key: "$in", Value: bson.A{int64(0), nil}}}}
	}
	return bson.E{Key: field, Value: v}
}

// applyPop applies the last pop sd records to its document, when the
// document still holds the record (a conditional update, so applying it
// twice does nothing). d is the document if the caller has it (it is read
// otherwise); docs are the documents the caller read, where it is looked
// for first.
func (s *Session) applyPop(ctx context.Context, sd *sessionDoc, d *messageDoc, docs []messageDoc) error {
	p := sd.Popping
	if p == nil || p.G != sd.Generation {
		return nil
	}
	if d == nil {
		for i := range docs {
			if sameValue(docs[i].id, p.ID) {
				d = &docs[i]
				break
			}
		}
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if d == nil {
		var raw bson.Raw
		err := s.st.messages.FindOne(cctx, bson.D{{Key: "_id", Value: p.ID}, byID(s.id)},
			options.FindOne().SetProjection(popProjection)).Decode(&raw)
		if errors.Is(err, mongodrv.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read a popped document: %w", err)
		}
		m, err := parseMessageDoc(raw)
		if err != nil {
			return err
		}
		d = &m
	}
	if int64(d.records()) != p.N {
		return nil // applied
	}
	_, err := s.take(cctx, d, int(p.J))
	return err
}

// testHookAfterReserve, when set by a test, runs between an append's
// reservation and its insert, with the batch's seq.
var testHookAfterReserve func(s *Session, seq int64)
