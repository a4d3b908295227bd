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
// that all of them land, contiguously and in order, or none do. It costs
// two round trips: the reservation of a seq on the session document
// (which also returns the current generation), then the insert.
//
// A batch holding an invalid item is refused with an error wrapping
// session.ErrInvalidItem, and one whose document would exceed the size
// limit with an error wrapping session.ErrBatchTooLarge, both before
// anything is written.
func (s *Session) AddItems(ctx context.Context, items []session.Item) error {
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
	for attempt := 0; ; attempt++ {
		sd, now, err := s.reserve(ctx, int64(len(items)))
		if err != nil {
			return fmt.Errorf("mongo: add items: %w", err)
		}
		err = s.insertBatch(ctx, sd.Seq, sd.Generation, items, now)
		if err == nil {
			s.st.est.observe(len(items), 1)
			s.afterWrite(ctx, sd, now)
			return nil
		}
		// A duplicate seq: the server handed the same seq out twice
		// (FerretDB v1), and the unique index refused the second batch.
		// Nothing was written; reserve again.
		if !mongodrv.IsDuplicateKeyError(err) || attempt+1 >= maxSeqConflicts {
			return fmt.Errorf("mongo: add items: %w", err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// maxSeqConflicts bounds the retries of a batch whose seq turned out to be
// taken, or below one its handle had seen; only servers without atomic
// updates cause either.
const maxSeqConflicts = 64

// reserve adds n to the session document's _seq, creating the document if
// there is none, and refreshes its expiry; it returns the document as
// updated (so its _seq is the last seq reserved) and the write's time.
//
// An expired session document does not match the filter, so the upsert
// runs into the unique index: the session is then restarted (a new
// generation) and the reservation retried. A reservation therefore never
// lands in an expired generation, which would bring its old items back.
func (s *Session) reserve(ctx context.Context, n int64) (*sessionDoc, time.Time, error) {
	regressions := 0
	for attempt := 0; attempt < maxReserveAttempts+regressions; attempt++ {
		now := s.st.now()
		set := bson.D{{Key: fUpdatedAt, Value: now}}
		onInsert := bson.D{{Key: fCreatedAt, Value: now}, {Key: fGeneration, Value: s.st.initialGeneration()}}
		if s.st.opts.TTL > 0 {
			set = append(set, bson.E{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)})
			onInsert = append(onInsert, bson.E{Key: fMessagesExpireAt, Value: s.st.messageExpiry(now)})
		}
		var sd sessionDoc
		err := s.st.sessions.FindOneAndUpdate(ctx,
			bson.D{byID(s.id), liveClause(now)},
			bson.D{
				{Key: "$inc", Value: bson.D{{Key: fSeq, Value: n}}},
				{Key: "$set", Value: set},
				{Key: "$setOnInsert", Value: onInsert},
			},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After),
		).Decode(&sd)
		if err == nil {
			floor := s.floor.Load()
			if sd.Seq-n >= floor {
				s.noteSeq(sd.Seq)
				return &sd, now, nil
			}
			// Lost update: the counter went back below a seq this handle
			// has seen. Push it up and reserve again.
			if _, err := s.st.sessions.UpdateOne(ctx, bson.D{byID(s.id)},
				bson.D{{Key: "$max", Value: bson.D{{Key: fSeq, Value: floor}}}}); err != nil {
				return nil, now, fmt.Errorf("repair the seq counter: %w", err)
			}
			regressions++
			if regressions >= maxSeqConflicts {
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

// initialGeneration is the generation of a session document created by
// this Store. Without a TTL it is 0, as the Python SDK's. With a TTL it is
// random, so that message documents left behind by an earlier incarnation
// of the id (removed by the TTL monitor before its messages) stay
// invisible.
func (st *Store) initialGeneration() int64 {
	if st.opts.TTL > 0 {
		return newGeneration(0)
	}
	return 0
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

// insertBatch inserts one message document.
func (s *Session) insertBatch(ctx context.Context, seq, gen int64, items []session.Item, now time.Time) error {
	_, err := s.insertDoc(ctx, seq, gen, items, now)
	return err
}

// insertDoc inserts one message document and returns its _id.
func (s *Session) insertDoc(ctx context.Context, seq, gen int64, items []session.Item, now time.Time) (bson.ObjectID, error) {
	doc := batchDoc{
		id:      bson.NewObjectID(),
		session: s.id,
		seq:     seq,
		gen:     gen,
		items:   items,
		created: now,
		expires: s.st.messageExpiryPtr(now),
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
