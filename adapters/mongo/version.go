package mongo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// historyVersion is what HistoryVersion reports: the session document's
// generation, _seq, _top, _pops and _expired_through (Unix milliseconds),
// all 0 without a session document. Every change of the stored history
// made by this package or the Python SDK, except a Python pop, moves one of
// them, and none ever comes back: _seq only grows, and so do _top and
// _pops (see "Versions" in the package documentation).
type historyVersion struct {
	gen, seq, top, pops, expiredThrough int64
}

const versionPrefix = "mongo1:"

func (v historyVersion) String() string {
	return fmt.Sprintf("%s%d:%d:%d:%d:%d", versionPrefix, v.gen, v.seq, v.top, v.pops, v.expiredThrough)
}

// versionOf returns the version of session document sd (nil: none).
func versionOf(sd *sessionDoc) historyVersion {
	if sd == nil {
		return historyVersion{}
	}
	v := historyVersion{gen: sd.Generation, seq: sd.Seq, top: sd.Top, pops: sd.Pops}
	if sd.ExpiredThrough != nil {
		v.expiredThrough = sd.ExpiredThrough.UnixMilli()
	}
	return v
}

// errBadVersion reports a version string HistoryVersion did not make.
var errBadVersion = errors.New("not a version of this package")

func parseVersion(s string) (historyVersion, error) {
	rest, ok := strings.CutPrefix(s, versionPrefix)
	parts := strings.Split(rest, ":")
	if !ok || len(parts) != 5 {
		return historyVersion{}, errBadVersion
	}
	var n [5]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return historyVersion{}, errBadVersion
		}
		n[i] = x
	}
	return historyVersion{n[0], n[1], n[2], n[3], n[4]}, nil
}

// empty reports whether v is the version of a session without a session
// document (or one never written).
func (v historyVersion) empty() bool { return v == historyVersion{} }

// filter matches a session document whose version is v.
func (v historyVersion) filter() bson.D {
	return bson.D{
		generationIs(fGeneration, v.gen),
		zeroOrMissing(fSeq, v.seq),
		zeroOrMissing(fTop, v.top),
		zeroOrMissing(fPops, v.pops),
		v.expiredThroughClause(),
	}
}

func (v historyVersion) expiredThroughClause() bson.E {
	if v.expiredThrough == 0 {
		return bson.E{Key: fExpiredThrough, Value: nil}
	}
	return bson.E{Key: fExpiredThrough, Value: bson.DateTime(v.expiredThrough)}
}

// reservedBy reports whether sd, returned by the reservation of n seqs,
// shows the history still at version v: only that reservation happened.
func (v historyVersion) reservedBy(sd *sessionDoc, n int64) bool {
	got := versionOf(sd)
	got.seq -= n
	return got == v
}

// unchangedSince matches a session document that nothing changed since
// the reservation that returned sd, made for a replace from version v.
func (v historyVersion) unchangedSince(sd *sessionDoc) bson.D {
	w := v
	w.seq = sd.Seq
	f := w.filter()
	return f[1:] // the generation is already in the replace's filter
}

// HistoryVersion returns a version of the session's stored history (one
// round trip, a read of the session document). It changes with every
// append, pop, clear, replace and expiry restart made by this package, and
// with every append and clear of the Python SDK; a Python pop does not
// change it (the SDK's pop writes only the message document). Reserving a
// seq also changes it, so a version may change while the items do not.
func (s *Session) HistoryVersion(ctx context.Context) (_ string, err error) {
	defer refusedID(&err, s.id, "")
	if err := s.check(ctx); err != nil {
		return "", err
	}
	sd, err := s.loadSession(ctx)
	if err != nil {
		return "", fmt.Errorf("mongo: history version: %w", err)
	}
	return versionOf(sd).String(), nil
}

// ReplaceItemsIf replaces the whole history with items, as ReplaceItems,
// only if its version is still version; otherwise it returns an error
// wrapping session.ErrHistoryChanged, and no item is written (the
// reservation a replace makes may have moved the seq counter, which
// changes the version but no item). The guard is the replace's commit, the
// switch of the session document's generation, conditioned on the
// counters a concurrent append, pop, clear or replace moves: a write that
// lands between the version check and the switch makes the switch fail.
// With no items it is a conditional Clear.
func (s *Session) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) (err error) {
	defer refusedID(&err, s.id, "")
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.check(ctx); err != nil {
		return err
	}
	want, err := parseVersion(version)
	if err != nil {
		return fmt.Errorf("mongo: replace items if: version %q: %w: %w", version, err, session.ErrHistoryChanged)
	}
	if len(items) > 0 {
		if err := s.st.checkBatchSize(s.id, items); err != nil {
			return err
		}
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return fmt.Errorf("mongo: replace items if: %w", err)
	}
	// Look first, so that a stale version writes nothing at all.
	sd, err := s.loadSession(ctx)
	if err != nil {
		return fmt.Errorf("mongo: replace items if: %w", err)
	}
	if versionOf(sd) != want {
		return fmt.Errorf("mongo: replace items if: %w", session.ErrHistoryChanged)
	}
	if len(items) == 0 {
		if sd == nil {
			return nil
		}
		done, err := s.clearOnce(ctx, &want)
		if err == nil && !done {
			err = session.ErrHistoryChanged // expired meanwhile: its restart changes the version
		}
		if err != nil {
			return fmt.Errorf("mongo: replace items if: %w", err)
		}
		return nil
	}
	done, err := s.replaceOnce(ctx, items, &want)
	if err == nil && !done {
		err = session.ErrHistoryChanged
	}
	if err != nil {
		return fmt.Errorf("mongo: replace items if: %w", err)
	}
	return nil
}
