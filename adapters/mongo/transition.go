package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// A transition moves a session to a new generation with one update of its
// session document: that update is the commit, and it makes every message
// document of older generations invisible at once. Clear, ReplaceItems and
// the restart of an expired session are transitions. Each reserves one seq
// in the same update and, after committing, writes a marker (an empty
// message document) under that seq and the new generation, then deletes
// the dead documents below it. Seqs are numbered as the Python SDK numbers
// them: the marker sits at the one seq its transition reserved. The marker comes first so that a read
// overlapping the deletion always sees a document newer than the session
// document it read, and starts over (see read).

// maxReplaceAttempts bounds the retries of a replace that loses its
// conditional switch to a concurrent clear or replace.
const maxReplaceAttempts = 5

// Clear deletes every item of the session: it bumps the generation (one
// round trip, the commit), then writes a marker and deletes the old
// documents (two more, which run to completion even if ctx is cancelled
// once the commit is made). Clearing a session that was never written
// costs one round trip (two with a TTL). The session's checkpoints stay.
//
// With a TTL, a Clear of an expired session first restarts it (see
// restart), as every write that refreshes the expiry does: refreshing it
// without ending the expiry would bring back the checkpoints the expiry
// took, which the session's live expiry keeps alive.
func (s *Session) Clear(ctx context.Context) (err error) {
	defer refusedID(&err, s.id, "")
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return fmt.Errorf("mongo: clear: %w", err)
	}
	for range maxReserveAttempts {
		done, err := s.clearOnce(ctx, nil)
		if err != nil || done {
			return err
		}
		if err := s.restart(ctx); err != nil {
			return fmt.Errorf("mongo: clear: %w", err)
		}
	}
	return errors.New("mongo: clear: the session document kept changing")
}

// clearOnce is one attempt of Clear; done is false when, with a TTL, the
// session document exists but has expired (it is to be restarted first).
// With want, the clear is conditional (ReplaceItemsIf with no items): it
// commits only if the session document is exactly as want describes, and
// otherwise fails with session.ErrHistoryChanged.
func (s *Session) clearOnce(ctx context.Context, want *historyVersion) (done bool, err error) {
	now := s.st.now()
	set := bson.D{{Key: fUpdatedAt, Value: now}}
	update := bson.D{
		{Key: "$inc", Value: bson.D{{Key: fGeneration, Value: int64(1)}, {Key: fSeq, Value: int64(1)}}},
	}
	if s.st.opts.TTL > 0 {
		set = append(set,
			bson.E{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)},
			bson.E{Key: fMessagesExpireAt, Value: s.st.messageExpiry(now)})
		update = append(update, bson.E{Key: "$max", Value: bson.D{{Key: fPurgeBy, Value: s.st.messageExpiry(now)}}})
	}
	update = append(update, bson.E{Key: "$set", Value: set}, unsetInFlight)
	filter := bson.D{byID(s.id)}
	if s.st.opts.TTL > 0 {
		filter = append(filter, liveClause(now))
	}
	if want != nil {
		filter = append(filter, want.filter()...)
	}
	var sd sessionDoc
	err = s.st.sessions.FindOneAndUpdate(ctx, filter, update,
		options.FindOneAndUpdate().SetReturnDocument(options.After),
	).Decode(&sd)
	if errors.Is(err, mongodrv.ErrNoDocuments) && want != nil {
		cur, err := s.loadSession(ctx)
		if err != nil {
			return false, err
		}
		if cur == nil && want.empty() {
			return true, nil // no session: nothing to clear, as the version said
		}
		return false, session.ErrHistoryChanged
	}
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		if s.st.opts.TTL <= 0 {
			return true, nil
		}
		cur, err := s.loadSession(ctx)
		if err != nil {
			return false, fmt.Errorf("mongo: clear: %w", err)
		}
		return cur == nil, nil // no session: nothing to clear
	}
	if err != nil {
		return false, fmt.Errorf("mongo: clear: %w", committing(err))
	}
	s.sweep(ctx, &sd, now)
	return true, nil
}

// ReplaceItems atomically replaces the whole history with items. It
// reserves a seq, writes the batch under a fresh random generation (still
// invisible), and switches the session document to that generation only
// if its generation is still the one the reservation saw; that switch is
// the commit. A lost switch deletes the batch and starts over; after
// maxReplaceAttempts losses it fails and changes nothing. Five round trips
// when it wins at once (reserve, insert, switch, marker, garbage
// collection). Replacing with no items is Clear.
func (s *Session) ReplaceItems(ctx context.Context, items []session.Item) (err error) {
	defer refusedID(&err, s.id, "")
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	if len(items) == 0 {
		return s.Clear(ctx)
	}
	if err := s.st.checkBatchSize(s.id, items); err != nil {
		return err
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return fmt.Errorf("mongo: replace items: %w", err)
	}
	for range maxReplaceAttempts {
		done, err := s.replaceOnce(ctx, items, nil)
		if err != nil || done {
			if err != nil {
				return fmt.Errorf("mongo: replace items: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("mongo: replace items: lost %d races with concurrent clears or replaces", maxReplaceAttempts)
}

// unsetInFlight drops, in a transition's commit, the old generation's
// reservations (in flight or abandoned) and its last pop: none concerns
// the new generation, whose documents are all newer.
var unsetInFlight = bson.E{Key: "$unset", Value: bson.D{{Key: fResv, Value: ""}, {Key: fAbandoned, Value: ""}, {Key: fPopping, Value: ""}}}

// testHookBeforeSwitch, when set by a test, runs between a replace's batch
// insert and its switch, to lose the race on purpose.
var testHookBeforeSwitch func(*Session)

// replaceOnce makes one attempt; done is false when the switch was lost.
// With want, the replace is conditional (ReplaceItemsIf): a reservation
// that shows the history changed since want, or a lost switch, fails with
// session.ErrHistoryChanged, and the switch also requires _seq, _top, _pops
// and _expired_through to be as the reservation left them.
func (s *Session) replaceOnce(ctx context.Context, items []session.Item, want *historyVersion) (done bool, err error) {
	sd, now, err := s.reserve(ctx, int64(len(items)))
	if err != nil {
		return false, err
	}
	filter := bson.D{byID(s.id), generationIs(fGeneration, sd.Generation)}
	if want != nil {
		if !want.reservedBy(sd, int64(len(items))) {
			return false, session.ErrHistoryChanged
		}
		filter = append(filter, want.unchangedSince(sd)...)
	}
	gen := newGeneration(sd.Generation)
	baseID, err := s.insertDoc(ctx, sd, sd.batchSeq(), gen, items, now)
	if err != nil {
		return false, err
	}
	set := bson.D{
		{Key: fGeneration, Value: gen},
		{Key: fBaseGeneration, Value: gen},
		{Key: fBaseSeq, Value: sd.batchSeq()},
		{Key: fUpdatedAt, Value: now},
	}
	if s.st.opts.TTL > 0 {
		set = append(set,
			bson.E{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)},
			bson.E{Key: fMessagesExpireAt, Value: s.st.messageExpiry(now)})
	}
	if testHookBeforeSwitch != nil {
		testHookBeforeSwitch(s)
	}
	var after sessionDoc
	err = s.st.sessions.FindOneAndUpdate(ctx,
		filter,
		bson.D{
			{Key: "$set", Value: set},
			{Key: "$inc", Value: bson.D{{Key: fSeq, Value: int64(1)}}},
			unsetInFlight,
		},
		options.FindOneAndUpdate().SetReturnDocument(options.After),
	).Decode(&after)
	if err != nil && !errors.Is(err, mongodrv.ErrNoDocuments) {
		// Unknown outcome (a network error, a cancelled context): the
		// switch may have been applied. Look before deleting anything.
		cctx, cancel := cleanupContext(ctx)
		sd2, lerr := s.loadSession(cctx)
		cancel()
		if lerr == nil && sd2 != nil && sd2.Generation == gen {
			// Committed. Its seq for a marker is unknown, so the old
			// documents stay (invisible) for the next transition to delete.
			return true, nil
		}
		if lerr != nil {
			// Still unknown: leave the batch; if the switch was lost, the
			// next transition's garbage collection deletes it.
			return false, fmt.Errorf("switch the generation: %w", committing(err))
		}
	}
	if err != nil {
		// Lost: the batch is under a generation no one else will install;
		// delete it now (else the next transition's collection will).
		cctx, cancel := cleanupContext(ctx)
		_, _ = s.st.messages.DeleteOne(cctx, bson.D{{Key: "_id", Value: baseID}, byID(s.id)})
		cancel()
		if errors.Is(err, mongodrv.ErrNoDocuments) {
			if want != nil {
				return false, session.ErrHistoryChanged
			}
			return false, nil
		}
		return false, fmt.Errorf("switch the generation: %w", err)
	}
	s.sweep(ctx, &after, now)
	return true, nil
}

// restart ends the expiry of a session whose session document has
// expired (see "Expiry" in the package documentation). Its commit is one
// update of the session document, conditioned on the expiry it read: it
// sets _expired_through to _purge_by, the upper bound of every expires_at
// stamped so far, so that every stamped document, hidden since the expiry,
// stays hidden for good (a later stamp is always above it), and refreshes
// the expiry (without a TTL, drops it). The generation is kept: the
// Python SDK reads only the current generation, and the items it wrote
// after the expiry (never stamped) must stay in its view and ours. The
// checkpoints saved before the expiry end with it: their expiry lies
// below _expired_through (see ckptView.live). Then it deletes the hidden
// documents and those checkpoints, best effort (where the server has TTL
// indexes they would go anyway). A session that is no longer expired is
// left alone.
func (s *Session) restart(ctx context.Context) error {
	now := s.st.now()
	sd, err := s.loadSession(ctx)
	if err != nil {
		return fmt.Errorf("restart an expired session: %w", err)
	}
	if sd == nil || !sd.expired(now) {
		return nil
	}
	through := sd.expiredThrough()
	set := bson.D{{Key: fUpdatedAt, Value: now}, {Key: fExpiredThrough, Value: through}}
	update := bson.D{}
	if s.st.opts.TTL > 0 {
		set = append(set, bson.E{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)})
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: fMessagesExpireAt, Value: ""}}})
	} else {
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: fExpiresAt, Value: ""}, {Key: fMessagesExpireAt, Value: ""}}})
	}
	update = append(update, bson.E{Key: "$set", Value: set})
	res, err := s.st.sessions.UpdateOne(ctx, bson.D{byID(s.id), {Key: fExpiresAt, Value: *sd.ExpiresAt}}, update)
	if err != nil {
		return fmt.Errorf("restart an expired session: %w", err)
	}
	if res.MatchedCount == 0 {
		return nil // restarted or written by someone else meanwhile
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if _, err := s.st.messages.DeleteMany(cctx, bson.D{
		byID(s.id),
		{Key: fExpiresAt, Value: bson.D{{Key: "$lte", Value: through}}},
	}); err != nil {
		slog.WarnContext(ctx, "mongo: could not delete an expired session's documents; they stay hidden",
			"collection", s.st.opts.MessagesCollection, "error", err)
	}
	s.dropExpiredCkpts(cctx, through)
	return nil
}

// sweep finishes a committed transition to sd's generation at seq sd.Seq:
// it writes the marker, then deletes every document below it that is not
// of the new generation (a replace's batch is). Both are best effort and
// run to completion even if ctx is cancelled; a failure leaves dead
// documents, which no read shows and the next transition deletes.
func (s *Session) sweep(ctx context.Context, sd *sessionDoc, now time.Time) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	if err := s.insertBatch(cctx, sd, sd.Generation, nil, now); err != nil {
		slog.WarnContext(ctx, "mongo: could not write a generation marker; old documents stay until the next clear",
			"collection", s.st.opts.MessagesCollection, "error", err)
		return
	}
	_, err := s.st.messages.DeleteMany(cctx, bson.D{
		byID(s.id),
		{Key: fMsgSeq, Value: bson.D{{Key: "$lt", Value: sd.batchSeq()}}},
		{Key: fMsgGeneration, Value: bson.D{{Key: "$ne", Value: sd.Generation}}},
	})
	if err != nil {
		slog.WarnContext(ctx, "mongo: could not delete a cleared generation's documents; they stay until the next clear",
			"collection", s.st.opts.MessagesCollection, "error", err)
	}
}
