package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// maxReserveAttempts bounds the retries of a reservation that meets an
// expired session document or a concurrent first write.
const maxReserveAttempts = 8

// AddItems appends items as one atomic batch: one message document, so
// that all of them land, contiguously and in order, or none do.
//
// A batch holding an invalid item is refused with an error wrapping
// session.ErrInvalidItem, and one whose document would exceed the size
// limit with an error wrapping session.ErrBatchTooLarge, both before
// anything is written.
//
// The batch becomes visible at its commit, an update of the session
// document that lands only if no batch reserved after it was committed
// first (it then reserves again): readers never see a batch appear below
// one they have already seen. Three round trips: reserve, insert
// (hidden), commit, which first waits for the appends reserved before
// it (see "Linearizability" in the package documentation).
func (s *Session) AddItems(ctx context.Context, items []session.Item) (err error) {
	defer refusedID(&err, s.id, "")
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	if err := s.st.checkBatchSize(s.id, items); err != nil {
		return err
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return fmt.Errorf("mongo: add items: %w", err)
	}
	sd, now, err := s.appendBatch(ctx, items, nil)
	if err != nil {
		return fmt.Errorf("mongo: add items: %w", err)
	}
	s.st.est.observe(len(items), 1)
	s.afterWrite(ctx, sd, now)
	return nil
}

// maxSeqRegressions bounds how often a reservation is retried because the
// counter went back below a seq its handle had seen (see guardLostUpdate).
const maxSeqRegressions = 64

// reserve adds n to the session document's _seq, creating the document if
// there is none (with the Python SDK's $setOnInsert), and, with a TTL,
// refreshes its expiry; it returns the document as updated (so the batch's
// seq is its _seq minus one, as the Python SDK numbers it) and the write's
// time.
//
// An expired session document does not match the filter, so the upsert
// runs into the unique index: the session is then restarted (see restart)
// and the reservation retried.
func (s *Session) reserve(ctx context.Context, n int64) (*sessionDoc, time.Time, error) {
	return s.reserveAs(ctx, n, bson.NilObjectID)
}

// reserveAs is reserve; an append passes a non-zero id, which the
// reservation records in _resv (see "Linearizability" in the package
// documentation) so that the appends reserved after it wait for its commit.
func (s *Session) reserveAs(ctx context.Context, n int64, id bson.ObjectID) (*sessionDoc, time.Time, error) {
	regressions := 0
	for attempt := 0; attempt < maxReserveAttempts+regressions; attempt++ {
		now := s.st.now()
		set := bson.D{{Key: fUpdatedAt, Value: now}}
		if !id.IsZero() {
			set = append(set, bson.E{Key: fResv + "." + id.Hex(), Value: now})
		}
		onInsert := bson.D{{Key: fCreatedAt, Value: now}, {Key: fGeneration, Value: int64(0)}}
		update := bson.D{
			{Key: "$inc", Value: bson.D{{Key: fSeq, Value: n}}},
		}
		if s.st.opts.TTL > 0 {
			set = append(set, bson.E{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)})
			onInsert = append(onInsert, bson.E{Key: fMessagesExpireAt, Value: s.st.messageExpiry(now)})
			update = append(update, bson.E{Key: "$max", Value: bson.D{{Key: fPurgeBy, Value: s.st.messageExpiry(now)}}})
		}
		update = append(update, bson.E{Key: "$set", Value: set}, bson.E{Key: "$setOnInsert", Value: onInsert})
		var sd sessionDoc
		err := s.st.sessions.FindOneAndUpdate(ctx,
			bson.D{byID(s.id), liveClause(now)},
			update,
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
		).Decode(&sd)
		if err == nil {
			ok, err := s.guardLostUpdate(ctx, &sd, n)
			if err != nil {
				return nil, now, err
			}
			if ok {
				return &sd, now, nil
			}
			regressions++
			if regressions >= maxSeqRegressions {
				return nil, now, errors.New("reserve a seq: the server keeps losing updates to the seq counter")
			}
			if err := backoff(ctx, regressions); err != nil {
				return nil, now, err
			}
			continue
		}
		if !mongodrv.IsDuplicateKeyError(err) {
			return nil, now, fmt.Errorf("reserve a seq: %w", err)
		}
		// An expired session document (or a concurrent first write) holds
		// the id: restart it if it is expired, then try again.
		if err := s.restart(ctx); err != nil {
			return nil, now, err
		}
	}
	return nil, time.Time{}, errors.New("reserve a seq: the session document kept changing")
}

// guardLostUpdate is the FerretDB guard "lost $inc" (see the package
// documentation): it reports whether the n seqs that sd's update reserved
// all lie at or above the handle's floor. When they do not, the server
// lost an update to the counter (single-document updates are atomic on
// MongoDB, not on FerretDB v1): the counter is pushed up to the floor with
// $max, and the caller reserves again. On MongoDB it fires only for a
// counter that another writer set back (the Python SDK's older releases
// deleted the session document on clear), or for a document an older
// release of this package numbered one past its batch: pushing the counter
// up then keeps every later batch above everything this handle has seen,
// and never makes any writer's insert fail.
func (s *Session) guardLostUpdate(ctx context.Context, sd *sessionDoc, n int64) (bool, error) {
	floor := s.floor.Load()
	if sd.Seq-n >= floor {
		s.noteSeq(sd.Seq)
		return true, nil
	}
	if _, err := s.st.sessions.UpdateOne(ctx, bson.D{byID(s.id)},
		bson.D{{Key: "$max", Value: bson.D{{Key: fSeq, Value: floor}}}}); err != nil {
		return false, fmt.Errorf("repair the seq counter: %w", err)
	}
	return false, nil
}

// messageExpiry is the expires_at of a message document written at now.
func (st *Store) messageExpiry(now time.Time) time.Time {
	return now.Add(st.opts.TTL + st.opts.messageSlack())
}

// messageExpiryPtr is messageExpiry, or nil without a TTL.
func (st *Store) messageExpiryPtr(now time.Time) *time.Time {
	if st.opts.TTL <= 0 {
		return nil
	}
	t := st.messageExpiry(now)
	return &t
}

// stampFor returns the expires_at of a message document written at now
// under session document sd (nil without a TTL): now+TTL+slack, but always
// after sd's _expired_through, so that a new document is never born
// expired. When that pushes it beyond what sd's update recorded in
// _purge_by, the bound is raised first (only a session restarted by a
// Store with a longer TTL needs it).
func (s *Session) stampFor(ctx context.Context, sd *sessionDoc, now time.Time) (*time.Time, error) {
	if s.st.opts.TTL <= 0 {
		return nil, nil
	}
	p := s.st.messageExpiry(now)
	if sd != nil && sd.ExpiredThrough != nil && !p.After(*sd.ExpiredThrough) {
		p = sd.ExpiredThrough.Add(time.Millisecond)
		if _, err := s.st.sessions.UpdateOne(ctx, bson.D{byID(s.id)},
			bson.D{{Key: "$max", Value: bson.D{{Key: fPurgeBy, Value: p}}}}); err != nil {
			return nil, fmt.Errorf("record the purge bound: %w", err)
		}
	}
	return &p, nil
}

// insertBatch inserts the batch reserved by sd's update, under generation
// gen, at the seq the Python SDK gives it.
func (s *Session) insertBatch(ctx context.Context, sd *sessionDoc, gen int64, items []session.Item, now time.Time) error {
	_, err := s.insertDoc(ctx, sd, sd.batchSeq(), gen, items, now)
	return err
}

// insertDoc inserts one message document and returns its _id.
func (s *Session) insertDoc(ctx context.Context, sd *sessionDoc, seq, gen int64, items []session.Item, now time.Time) (bson.ObjectID, error) {
	id := bson.NewObjectID()
	exp, err := s.stampFor(ctx, sd, now)
	if err != nil {
		return id, err
	}
	doc := batchDoc{
		id:      id,
		session: s.id,
		seq:     seq,
		gen:     gen,
		items:   items,
		created: now,
		expires: exp,
	}
	raw, err := doc.marshal()
	if err != nil {
		return doc.id, err
	}
	if _, err := s.st.messages.InsertOne(ctx, raw); err != nil {
		return doc.id, fmt.Errorf("insert a message document: %w", err)
	}
	return doc.id, nil
}
