package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// PopItem removes and returns the newest item. It reads the session
// document (with a TTL, refreshing its expiry), then the newest non-empty
// message documents, and walks the current generation's committed records
// from the newest back to the first one it can read; it commits the pop of
// exactly that record on the session document (conditioned on nothing
// having been committed since the read), then removes it with one update
// conditioned on the document being as it was read (a $pop of the last
// element, or, below records it cannot read, a $set of the array without
// it), and returns it. Four round trips; a lost commit (a concurrent
// append or pop) starts over. See "Linearizability" in the package
// documentation.
//
// A record it cannot read is never removed: it is reported through
// OnCorrupt and kept byte for byte, and the pop takes the newest readable
// item below it. An emptied batch document stays as a marker, deleted by
// the next transition (the Python SDK's pop deletes markers too). A legacy
// per-item document (its message_data a string) is deleted whole, since it
// holds one item. It returns ok == false and no error when the session
// holds no readable item.
func (s *Session) PopItem(ctx context.Context) (_ session.Item, _ bool, err error) {
	defer refusedID(&err, s.id, "")
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

// maxPopConflicts bounds the retries of a pop whose conditional update
// found the document changed by a concurrent pop.
const maxPopConflicts = 64

func (s *Session) pop(ctx context.Context) (session.Item, bool, error) {
	var (
		sd  *sessionDoc
		now time.Time
		err error
	)
	if s.st.opts.TTL <= 0 {
		sd, err = s.loadSession(ctx)
		now = s.st.now()
	} else {
		sd, now, err = s.liveForWrite(ctx)
	}
	if err != nil || sd == nil {
		return session.Item{}, false, err
	}
	if !sd.expired(now) {
		// (Stamping an expired session's documents would hide them.)
		defer s.afterWrite(ctx, sd, now)
	}
	w := popWindow
	for unsettled, conflicts := 0, 0; unsettled < maxUnsettled && conflicts < maxPopConflicts; {
		gen := sd.Generation
		docs, err := s.loadNonEmpty(ctx, &gen, w)
		if err != nil {
			return session.Item{}, false, err
		}
		// The last pop may not be applied yet (its process may have died):
		// apply it, so that this pop's commit, which replaces it, never
		// brings its record back.
		if err := s.applyPop(ctx, sd, nil, docs); err != nil {
			return session.Item{}, false, err
		}
		d, j, bad := newestReadable(view(docs, sd), sd, s.st.now(), s.id)
		if d == nil {
			if len(docs) == w {
				w = nextWindow(w)
				continue
			}
			// Empty, unless a transition switched generations (and may
			// have collected documents) since the session document was
			// read: look again.
			sd2, err := s.loadSession(ctx)
			if err != nil {
				return session.Item{}, false, err
			}
			if sd2 == nil || sd2.Generation == sd.Generation {
				s.report(ctx, bad)
				return session.Item{}, false, nil
			}
			sd = sd2
			unsettled++
			continue
		}
		ok, err := s.commitPop(ctx, sd, d, j)
		if err != nil {
			return session.Item{}, false, err
		}
		if !ok {
			// Something was committed since sd was read: choose again.
			conflicts++
			if err := backoff(ctx, conflicts); err != nil {
				return session.Item{}, false, err
			}
			if sd, err = s.loadSession(ctx); err != nil || sd == nil {
				return session.Item{}, false, err
			}
			continue
		}
		// Committed: the record is this pop's. Apply it to its document.
		sd.Pops++
		sd.Popping = &popIntent{ID: d.id, J: int64(j), N: int64(d.records()), G: gen}
		if err := s.applyPop(ctx, sd, d, nil); err != nil {
			slog.WarnContext(ctx, "mongo: a committed pop is not applied yet; the next pop applies it", "error", err)
		}
		s.report(ctx, bad)
		it, _ := d.record(nil, s.id, j)
		return it, true, nil
	}
	return session.Item{}, false, errUnsettled
}

// popWindow is how many message documents a pop reads at first.
const popWindow = 2

// report hands corrupt-record reports to the Store's handler.
func (s *Session) report(ctx context.Context, bad []driver.CorruptRecord) {
	for i := range bad {
		s.st.opts.OnCorrupt.Report(ctx, bad[i])
	}
}

// newestReadable walks docs (newest first) of sd's generation, skipping
// empty and hidden documents, from the newest record back, and returns the
// document and record index of the first readable item (j is -1 for a
// legacy per-item document), with the unreadable records above it. d is
// nil when docs hold no readable item.
func newestReadable(docs []messageDoc, sd *sessionDoc, now time.Time, sessionID string) (d *messageDoc, j int, bad []driver.CorruptRecord) {
	for i := range docs {
		m := &docs[i]
		if !m.inGeneration(sd.Generation) || m.records() == 0 || sd.hides(m, now) {
			continue
		}
		if !m.isArray() {
			if _, c := m.record(nil, sessionID, -1); c != nil {
				bad = append(bad, *c)
				continue
			}
			return m, -1, bad
		}
		for k := m.records() - 1; k >= 0; k-- {
			if _, c := m.record(nil, sessionID, k); c != nil {
				bad = append(bad, *c)
				continue
			}
			return m, k, bad
		}
	}
	return nil, 0, bad
}

// take removes record j of d (j == -1: the whole legacy document) with
// one update conditioned on d being as it was read, and reports whether
// it did. Arrays only ever shrink (every writer inserts whole documents),
// so an array of the length read whose element j is the one read is
// unchanged.
func (s *Session) take(ctx context.Context, d *messageDoc, j int) (bool, error) {
	if d.id.Type == 0 {
		return false, errors.New("a message document without _id")
	}
	var res *mongodrv.UpdateResult
	var err error
	switch {
	case j < 0:
		del, err := s.st.messages.DeleteOne(ctx, bson.D{
			{Key: "_id", Value: d.id}, byID(s.id), {Key: fMessageData, Value: d.data},
		})
		if err != nil {
			return false, fmt.Errorf("delete a legacy message document: %w", err)
		}
		return del.DeletedCount == 1, nil
	case j == len(d.vals)-1:
		res, err = s.st.messages.UpdateOne(ctx, bson.D{
			{Key: "_id", Value: d.id},
			byID(s.id),
			{Key: fMessageData, Value: bson.D{{Key: "$size", Value: j + 1}}},
			{Key: fMessageData + "." + strconv.Itoa(j), Value: d.vals[j]},
		}, bson.D{{Key: "$pop", Value: bson.D{{Key: fMessageData, Value: 1}}}})
	default:
		// Unreadable records sit above the item: keep them, byte for
		// byte, and take the item from below them.
		kept := make(bson.A, 0, len(d.vals)-1)
		for k, v := range d.vals {
			if k != j {
				kept = append(kept, v)
			}
		}
		res, err = s.st.messages.UpdateOne(ctx, bson.D{
			{Key: "_id", Value: d.id}, byID(s.id), {Key: fMessageData, Value: d.data},
		}, bson.D{{Key: "$set", Value: bson.D{{Key: fMessageData, Value: kept}}}})
	}
	if err != nil {
		return false, fmt.Errorf("pop from a message document: %w", err)
	}
	return res.MatchedCount == 1 && res.ModifiedCount == 1, nil
}

// loadNonEmpty reads the newest w non-empty message documents of
// generation *gen (of every generation when gen is nil), newest first.
func (s *Session) loadNonEmpty(ctx context.Context, gen *int64, w int) ([]messageDoc, error) {
	filter := bson.D{byID(s.id)}
	if gen != nil {
		filter = append(filter, generationIs(fMsgGeneration, *gen))
	}
	filter = append(filter, bson.E{Key: fMessageData, Value: bson.D{{Key: "$ne", Value: bson.A{}}}})
	return s.findMessages(ctx, filter, options.Find().SetSort(bson.D{{Key: fMsgSeq, Value: -1}}).SetProjection(popProjection).SetLimit(int64(w)))
}

// popProjection is messageProjection with _id, which a pop's condition
// names.
var popProjection = append(bson.D{{Key: "_id", Value: 1}}, messageProjection...)

// liveForWrite returns the session document for a write that does not
// reserve a seq (pop), refreshing its expiry if it has one and has not
// expired. An expired session is returned as it is, not restarted: a pop
// then sees only what the expiry does not hide (items the Python SDK wrote,
// never stamped), and refreshes nothing. nil means no session document.
func (s *Session) liveForWrite(ctx context.Context) (*sessionDoc, time.Time, error) {
	for range maxReserveAttempts {
		now := s.st.now()
		if s.st.opts.TTL > 0 {
			sd, now, err := s.sessionForWrite(ctx)
			if err != nil || sd != nil {
				return sd, now, err
			}
		}
		sd, err := s.loadSession(ctx)
		if err != nil || sd == nil {
			return nil, now, err
		}
		if s.st.opts.TTL <= 0 || sd.expired(s.st.now()) {
			return sd, now, nil
		}
		// Refreshed by someone else meanwhile: refresh it too.
	}
	return nil, time.Time{}, errors.New("read the session document: it kept changing")
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
		bson.D{
			{Key: "$set", Value: bson.D{
				{Key: fUpdatedAt, Value: now},
				{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)},
			}},
			{Key: "$max", Value: bson.D{{Key: fPurgeBy, Value: s.st.messageExpiry(now)}}},
		},
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
