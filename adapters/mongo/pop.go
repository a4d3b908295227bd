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
)

// codeTypeMismatch is the server's error code for $pop on a field that is
// not an array.
const codeTypeMismatch = 14

// PopItem removes and returns the newest item: it pops the last element of
// the newest non-empty message document of the current generation, with
// one atomic update that returns the document as it was. An emptied
// document stays as a marker, deleted by the next transition. Two round
// trips: the session document (for the generation), then the pop.
//
// A corrupt newest record is removed, reported through OnCorrupt, and the
// pop continues with the next record. A legacy per-item document (its
// message_data a string) is deleted whole, since it holds one item.
// It returns ok == false and no error when the session is empty.
func (s *Session) PopItem(ctx context.Context) (session.Item, bool, error) {
	if err := s.check(ctx); err != nil {
		return session.Item{}, false, err
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return session.Item{}, false, fmt.Errorf("mongo: pop item: %w", err)
	}
	it, ok, err := s.pop(ctx)
	if err != nil {
		return session.Item{}, false, fmt.Errorf("mongo: pop item: %w", err)
	}
	return it, ok, nil
}

func (s *Session) pop(ctx context.Context) (session.Item, bool, error) {
	sd, now, err := s.sessionForWrite(ctx)
	if err != nil || sd == nil {
		return session.Item{}, false, err
	}
	defer s.afterWrite(ctx, sd, now)
	gen := sd.Generation
	for unsettled := 0; unsettled < maxUnsettled; {
		filter := bson.D{
			byID(s.id),
			generationIs(fMsgGeneration, gen),
			{Key: fMessageData, Value: bson.D{{Key: "$ne", Value: bson.A{}}}},
		}
		var raw bson.Raw
		err := s.st.messages.FindOneAndUpdate(ctx, filter,
			bson.D{{Key: "$pop", Value: bson.D{{Key: fMessageData, Value: 1}}}},
			options.FindOneAndUpdate().
				SetSort(bson.D{{Key: fMsgSeq, Value: -1}}).
				SetReturnDocument(options.Before),
		).Decode(&raw)
		switch {
		case errors.Is(err, mongodrv.ErrNoDocuments):
			// Empty, unless a replace switched generations since the
			// session document was read: look again.
			sd2, err := s.loadSession(ctx)
			if err != nil {
				return session.Item{}, false, err
			}
			if sd2 == nil || sd2.expired(s.st.now()) || sd2.Generation == gen {
				return session.Item{}, false, nil
			}
			gen = sd2.Generation
			unsettled++
			continue
		case isTypeMismatch(err):
			// The newest document's message_data is not an array: a legacy
			// per-item document or a corrupt one.
			it, ok, err := s.popWhole(ctx, filter)
			if err != nil || ok {
				return it, ok, err
			}
			continue
		case err != nil:
			return session.Item{}, false, err
		}
		d, err := parseMessageDoc(raw)
		if err != nil {
			return session.Item{}, false, err
		}
		if !d.isArray() {
			// $pop left a document without message_data alone: it is one
			// corrupt record; delete it and go on.
			if deleted, err := s.deleteExact(ctx, d, bson.D{{Key: "$exists", Value: false}}); err != nil {
				return session.Item{}, false, err
			} else if deleted {
				_, c := d.record(s.id, -1)
				s.st.opts.OnCorrupt.Report(ctx, *c)
			}
			continue
		}
		last := d.records() - 1
		it, c := d.record(s.id, last)
		if c == nil {
			return it, true, nil
		}
		s.st.opts.OnCorrupt.Report(ctx, *c)
	}
	return session.Item{}, false, errUnsettled
}

// popWhole removes the newest document matching filter when its
// message_data is not an array: a valid legacy item is returned; anything
// else is reported as corrupt. ok is false when the caller should go on.
func (s *Session) popWhole(ctx context.Context, filter bson.D) (session.Item, bool, error) {
	var raw bson.Raw
	err := s.st.messages.FindOne(ctx, filter,
		options.FindOne().SetSort(bson.D{{Key: fMsgSeq, Value: -1}}).SetProjection(messageProjection),
	).Decode(&raw)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return session.Item{}, false, nil
	}
	if err != nil {
		return session.Item{}, false, err
	}
	d, err := parseMessageDoc(raw)
	if err != nil {
		return session.Item{}, false, err
	}
	if d.isArray() {
		return session.Item{}, false, nil // changed meanwhile: pop it
	}
	// Delete the document only if message_data is still what was read, so
	// that nothing else is ever deleted.
	deleted, err := s.deleteExact(ctx, d, d.data)
	if err != nil || !deleted {
		return session.Item{}, false, err
	}
	it, c := d.record(s.id, -1)
	if c != nil {
		s.st.opts.OnCorrupt.Report(ctx, *c)
		return session.Item{}, false, nil
	}
	return it, true, nil
}

// deleteExact deletes document d if its message_data still matches cond.
func (s *Session) deleteExact(ctx context.Context, d messageDoc, cond any) (bool, error) {
	if d.id.Type == 0 {
		return false, errors.New("a message document without _id")
	}
	res, err := s.st.messages.DeleteOne(ctx, bson.D{
		{Key: "_id", Value: d.id},
		byID(s.id),
		{Key: fMessageData, Value: cond},
	})
	if err != nil {
		return false, fmt.Errorf("delete a message document: %w", err)
	}
	return res.DeletedCount == 1, nil
}

// sessionForWrite returns the live session document for a write that
// does not reserve a seq (pop): without a TTL it is a plain read; with one
// it also refreshes the expiry. nil means no live session.
func (s *Session) sessionForWrite(ctx context.Context) (*sessionDoc, time.Time, error) {
	now := s.st.now()
	if s.st.opts.TTL <= 0 {
		sd, err := s.loadSession(ctx)
		if err != nil || sd == nil || sd.expired(now) {
			return nil, now, err
		}
		return sd, now, nil
	}
	var sd sessionDoc
	err := s.st.sessions.FindOneAndUpdate(ctx,
		bson.D{byID(s.id), liveClause(now)},
		bson.D{{Key: "$set", Value: bson.D{
			{Key: fUpdatedAt, Value: now},
			{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)},
		}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After),
	).Decode(&sd)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return nil, now, nil
	}
	if err != nil {
		return nil, now, fmt.Errorf("read the session document: %w", err)
	}
	return &sd, now, nil
}

// isTypeMismatch reports the server's refusal to $pop a non-array.
func isTypeMismatch(err error) bool {
	var se mongodrv.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeTypeMismatch)
}
