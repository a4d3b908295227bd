package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
)

// Expiry: see "Expiry" in the package documentation. In short, a
// session document's expires_at is the logical expiry, exact on every
// server; a message document is governed by it only once a write of this
// package has stamped it with an expires_at of its own (which a TTL index
// acts on), and only stamped documents are ever hidden or deleted because
// of an expiry.

// TTL returns the Store's time to live; 0 means sessions never expire.
func (s *Session) TTL() time.Duration { return s.st.opts.TTL }

// ExpiresIn returns how long until the session expires; ok is false when
// it has no data or no expiry. One round trip; when the session document
// is missing or expired, one more for the checkpoints, whose own expiry
// then says (a session holding only checkpoints expires with them).
func (s *Session) ExpiresIn(ctx context.Context) (_ time.Duration, _ bool, err error) {
	defer refusedID(&err, s.id, "")
	if err := s.check(ctx); err != nil {
		return 0, false, err
	}
	sd, err := s.loadSession(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("mongo: expires in: %w", err)
	}
	now := s.st.now()
	if sd != nil && sd.ExpiresAt == nil {
		return 0, false, nil
	}
	if sd == nil || sd.expired(now) {
		d, ok, err := s.ckptExpiresIn(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("mongo: expires in: %w", err)
		}
		return d, ok, nil
	}
	return sd.ExpiresAt.Sub(now), true, nil
}

// Touch restarts the session's expiry clock, if it has data that has not
// expired. Without a TTL it does nothing. One round trip (two when the
// message documents' purge time must move too).
func (s *Session) Touch(ctx context.Context) (err error) {
	defer refusedID(&err, s.id, "")
	if err := s.check(ctx); err != nil {
		return err
	}
	if s.st.opts.TTL <= 0 {
		return nil
	}
	sd, now, err := s.sessionForWrite(ctx)
	if err != nil {
		// The update that sets the expiry may have been applied.
		return fmt.Errorf("mongo: touch: %w", committing(err))
	}
	if sd != nil {
		s.afterWrite(ctx, sd, now)
	}
	return nil
}

// afterWrite keeps the message documents' purge time (their expires_at,
// which a TTL index acts on) at least slack/2 beyond the session's new
// expiry: when the session document's lower bound falls short, every
// message document of the session that expiry does not hide is pushed
// forward (stamping, too, the documents the Python SDK wrote, which it
// never stamps), then the bounds. Best effort: a document left unstamped
// is only never hidden by an expiry, and never deleted by one.
func (s *Session) afterWrite(ctx context.Context, sd *sessionDoc, now time.Time) {
	ttl := s.st.opts.TTL
	if ttl <= 0 || sd == nil {
		return
	}
	need := now.Add(ttl + s.st.opts.messageSlack()/2)
	if sd.MessagesExpireAt != nil && !sd.MessagesExpireAt.Before(need) {
		return
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	exp, err := s.stampFor(cctx, sd, now)
	if err != nil || exp == nil {
		return
	}
	// The session update of every write that calls afterWrite (reserve,
	// sessionForWrite) has already raised _purge_by to messageExpiry(now),
	// and stampFor raised it beyond when it had to: the upper bound covers
	// the push before the push is made.
	filter := bson.D{byID(s.id)}
	if sd.ExpiredThrough != nil {
		// Never push a document the last restart hid: it must stay hidden.
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: fExpiresAt, Value: bson.D{{Key: "$gt", Value: *sd.ExpiredThrough}}}},
			bson.D{{Key: fExpiresAt, Value: nil}},
		}})
	}
	if _, err := s.st.messages.UpdateMany(cctx, filter,
		bson.D{{Key: "$max", Value: bson.D{{Key: fExpiresAt, Value: *exp}}}}); err != nil {
		slog.WarnContext(ctx, "mongo: could not push message documents' expiry forward", "error", err)
		return
	}
	_, err = s.st.sessions.UpdateOne(cctx, bson.D{byID(s.id)},
		bson.D{{Key: "$max", Value: bson.D{{Key: fMessagesExpireAt, Value: *exp}}}})
	if err != nil && !errors.Is(err, mongodrv.ErrNoDocuments) {
		slog.WarnContext(ctx, "mongo: could not record message documents' expiry", "error", err)
	}
}
