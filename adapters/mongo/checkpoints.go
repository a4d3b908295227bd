package mongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Checkpoints: see "Checkpoints" in the package documentation. In short,
// every version of a checkpoint is a document of its own, whose content is
// never updated: _id is derived from the session id, the name and the
// version, so a save from version v is the insert of version v+1, and of
// two saves from v the unique _id lets exactly one in (the one thing every
// server, FerretDB included, does atomically; FerretDB's conditional
// updates are not: two findAndModify calls filtered on one version both
// match). A version is inserted pending, checked (its predecessor is still
// the newest committed version, and nothing committed lies above it: a
// save from a stale version whose successor was already deleted as old
// gets its insert in, and must not commit), then committed (the owner
// unsets pending), and the older versions are deleted. Readers see only
// committed versions; the current checkpoint is the newest one; a delete
// commits a tombstone as the next version.

// Field names of checkpoint documents (session_id, updated_at and
// expires_at are the sessions' and messages' own names).
const (
	fCkptName     = "name"     // the checkpoint's name
	fCkptVersion  = "version"  // its version, at least 1
	fCkptDocument = "document" // the document's bytes, BSON binary; absent in a tombstone
	fCkptDeleted  = "deleted"  // true in a tombstone: the checkpoint was deleted at this version
	fCkptPending  = "pending"  // true until the save that inserted the version commits it
	fCkptOwner    = "owner"    // while pending: the token of the save that inserted it
)

// pendingTimeout is how old a pending version must be before another save
// that finds it in its way takes it over (deletes it and inserts its own):
// the save that inserted it most likely died (a process killed, a lost
// connection) between its insert and its commit, which are a few round
// trips apart. Should that save still be running, its commit and its
// cleanup name its owner token, so they match nothing once the version is
// taken over: it reports a conflict, never a save it lost. Keep the clocks
// of the processes sharing a store within a fraction of this.
const pendingTimeout = 3 * time.Second

// pendingWait bounds how long a save whose version is pending in another
// save waits for that save's outcome before it reports a conflict; it is
// longer than pendingTimeout, so a version a dead save left is taken over
// by the save that waits for it.
const pendingWait = 8 * time.Second

// maxCkptAttempts bounds the retries of a save or delete at AnyVersion that
// loses its insert to a concurrent save.
const maxCkptAttempts = 16

// ckptDoc is one version of a checkpoint.
type ckptDoc struct {
	ID        string     `bson:"_id"`
	Name      string     `bson:"name"`
	Version   int64      `bson:"version"`
	Document  []byte     `bson:"document,omitempty"`
	Deleted   bool       `bson:"deleted,omitempty"`
	Pending   bool       `bson:"pending,omitempty"`
	UpdatedAt time.Time  `bson:"updated_at"`
	ExpiresAt *time.Time `bson:"expires_at,omitempty"`
}

// committed matches the committed versions.
var committed = bson.E{Key: fCkptPending, Value: bson.D{{Key: "$ne", Value: true}}}

// ckptID is the _id of version v of checkpoint name of session sid: the
// id's length, the id, the name and the version, ':' between them. The
// length says where the id ends and the version is the digits after the
// last ':', so no two (id, name, version) triples share an _id.
func ckptID(sid, name string, v int64) string {
	return strconv.Itoa(len(sid)) + ":" + sid + ":" + name + ":" + strconv.FormatInt(v, 10)
}

// ckptFilter matches every version of checkpoint name (every checkpoint of
// the session when name is nil).
func (s *Session) ckptFilter(name *string, more ...bson.E) bson.D {
	f := bson.D{byID(s.id)}
	if name != nil {
		f = append(f, bson.E{Key: fCkptName, Value: *name})
	}
	return append(f, more...)
}

// ckptView decides whether checkpoint documents are live at one instant,
// reading the session document at most once, and only for a checkpoint
// whose own expiry has passed.
type ckptView struct {
	s      *Session
	now    time.Time
	sd     *sessionDoc
	loaded bool
}

func (s *Session) newCkptView() *ckptView { return &ckptView{s: s, now: s.st.now()} }

// live reports whether d has not expired: it has no expiry (it was saved
// by a Store without a TTL), or its own expiry (its save plus the TTL) has
// not passed, or the session's has not (every write to the session
// restarts its checkpoints' clock) and no restart of the session after an
// expiry has ended it (its expiry lies below the session document's
// _expired_through: it was saved before the session expired).
func (v *ckptView) live(ctx context.Context, d *ckptDoc) (bool, error) {
	if d.ExpiresAt == nil || d.ExpiresAt.After(v.now) {
		return true, nil
	}
	if !v.loaded {
		sd, err := v.s.loadSession(ctx)
		if err != nil {
			return false, err
		}
		v.sd, v.loaded = sd, true
	}
	sd := v.sd
	if sd == nil || sd.ExpiresAt == nil || !sd.ExpiresAt.After(v.now) {
		return false, nil
	}
	return sd.ExpiredThrough == nil || !d.ExpiresAt.Before(*sd.ExpiredThrough), nil
}

// current returns d when it is a checkpoint the session holds: present,
// not a tombstone, live.
func (v *ckptView) current(ctx context.Context, d *ckptDoc) (*ckptDoc, error) {
	if d == nil || d.Deleted {
		return nil, nil
	}
	ok, err := v.live(ctx, d)
	if err != nil || !ok {
		return nil, err
	}
	return d, nil
}

// LoadCheckpoint returns the document stored under name and its version:
// one round trip (the newest version of name), two when its own expiry
// has passed and the session document must say whether the session's
// writes kept it alive. It returns an error wrapping
// session.ErrNoCheckpoint when there is none.
func (s *Session) LoadCheckpoint(ctx context.Context, name string) (_ []byte, _ int64, err error) {
	defer refusedID(&err, s.id, name)
	if err := s.check(ctx); err != nil {
		return nil, 0, err
	}
	if err := validCheckpointName(name); err != nil {
		return nil, 0, err
	}
	fail := func(err error) ([]byte, int64, error) {
		return nil, 0, fmt.Errorf("mongo: load checkpoint %q of session %q: %w", name, s.id, err)
	}
	view := s.newCkptView()
	top, err := s.topCkpt(ctx, name, true)
	if err != nil {
		return fail(err)
	}
	if top, err = view.current(ctx, top); err != nil {
		return fail(err)
	}
	if top == nil {
		return fail(session.ErrNoCheckpoint)
	}
	if top.Document == nil {
		top.Document = []byte{}
	}
	return top.Document, top.Version, nil
}

// SaveCheckpoint stores doc under name if the stored version is version (0:
// none is stored; session.AnyVersion: any), and returns the new version;
// otherwise it returns an error wrapping session.ErrCheckpointConflict and
// writes nothing.
//
// Round trips: a read of the version saved from (by _id for a version
// above 0, the newest version for 0 and AnyVersion), the insert of the
// next version (the commit), a read for a newer version (a save from a
// stale version whose successor had already been deleted as old gets in,
// finds the newer one, deletes itself and conflicts), and the deletion of
// the older versions. With a TTL the session's expiry is then restarted,
// as Touch does (one or two more).
func (s *Session) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (_ int64, err error) {
	defer refusedID(&err, s.id, name)
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if err := validCheckpointName(name); err != nil {
		return 0, err
	}
	if len(doc) == 0 {
		return 0, fmt.Errorf("mongo: save checkpoint %q of session %q: empty document", name, s.id)
	}
	if size := len(doc) + 2*len(s.id) + 2*len(name) + 256; size > MaxDocumentBytes {
		return 0, fmt.Errorf("mongo: save checkpoint %q of session %q: a %d-byte document exceeds the %d-byte BSON document limit",
			name, s.id, len(doc), MaxDocumentBytes)
	}
	v, err := s.writeCkpt(ctx, "save", name, doc, version)
	if err != nil {
		return 0, err
	}
	if s.st.opts.TTL > 0 {
		// The save restarts the whole session's clock, as Touch does; best
		// effort once the checkpoint is stored (it carries its own expiry).
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		sd, now, err := s.sessionForWrite(cctx)
		if err != nil {
			slog.WarnContext(ctx, "mongo: checkpoint saved, but the session's expiry could not be restarted",
				"session", s.id, "checkpoint", name, "error", err)
		} else if sd != nil {
			s.afterWrite(cctx, sd, now)
		}
	}
	return v, nil
}

// DeleteCheckpoint removes the checkpoint under name if its stored version
// is version (or version is session.AnyVersion), and otherwise returns an
// error wrapping session.ErrCheckpointConflict. Deleting a checkpoint that
// is not there succeeds for version 0 and AnyVersion, writing nothing. A
// delete is a save of a tombstone, with the same round trips (no expiry is
// restarted).
func (s *Session) DeleteCheckpoint(ctx context.Context, name string, version int64) (err error) {
	defer refusedID(&err, s.id, name)
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := validCheckpointName(name); err != nil {
		return err
	}
	_, err = s.writeCkpt(ctx, "delete", name, nil, version)
	return err
}

// ListCheckpoints returns the names of the session's checkpoints, sorted:
// one round trip (every version document of the session, without their
// documents), two when a checkpoint's own expiry has passed.
func (s *Session) ListCheckpoints(ctx context.Context) (_ []string, err error) {
	defer refusedID(&err, s.id, "")
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	view := s.newCkptView()
	tops, err := s.topCkpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("mongo: list checkpoints of session %q: %w", s.id, err)
	}
	names := []string{}
	for _, d := range tops {
		cur, err := view.current(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("mongo: list checkpoints of session %q: %w", s.id, err)
		}
		if cur != nil {
			names = append(names, cur.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// writeCkpt saves doc (a tombstone when doc is nil) as the version after
// version and returns it, or a conflict. See SaveCheckpoint.
func (s *Session) writeCkpt(ctx context.Context, op, name string, doc []byte, version int64) (int64, error) {
	fail := func(err error) (int64, error) {
		return 0, fmt.Errorf("mongo: %s checkpoint %q of session %q: %w", op, name, s.id, err)
	}
	if version < 0 && version != session.AnyVersion {
		return 0, s.ckptConflict(ctx, op, name, version)
	}
	if err := s.st.ensureCheckpointIndexes(ctx); err != nil {
		return fail(err)
	}
	for attempt := range maxCkptAttempts {
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return fail(err)
			}
		}
		view := s.newCkptView()
		base := version
		if version <= 0 {
			// 0 and AnyVersion save after the newest committed version,
			// whatever it is for AnyVersion; for 0, only when it is a
			// tombstone or has expired.
			top, err := s.topCkpt(ctx, name, false)
			if err != nil {
				return fail(err)
			}
			cur, err := view.current(ctx, top)
			if err != nil {
				return fail(err)
			}
			switch {
			case cur != nil && version == 0:
				return 0, s.conflictAt(op, name, cur.Version, version)
			case cur == nil && doc == nil:
				return 0, nil // nothing to delete
			}
			base = 0
			if top != nil {
				base = top.Version
			}
		}
		next := base + 1
		owner, err := newOwner()
		if err != nil {
			return fail(err)
		}
		won, err := s.insertCkpt(ctx, name, next, doc, view.now, owner)
		if err != nil {
			return fail(err)
		}
		if won {
			done, err := s.commitCkpt(ctx, view, name, base, next, version > 0, owner)
			if err != nil {
				return fail(err)
			}
			if done {
				return next, nil
			}
		}
		if version != session.AnyVersion {
			return 0, s.ckptConflict(ctx, op, name, version)
		}
	}
	return fail(fmt.Errorf("lost %d races with concurrent saves", maxCkptAttempts))
}

// commitCkpt finishes the save of version next, inserted pending: it
// checks that the version saved from (base) is still committed, and for a
// save from a given version (strict) still current, and that no committed
// version lies above next; then it commits next and deletes the versions
// below it. done is false, with the pending version deleted, when the
// check fails: the save conflicts. Once the insert is made the steps run
// to completion even if ctx is cancelled.
func (s *Session) commitCkpt(ctx context.Context, view *ckptView, name string, base, next int64, strict bool, owner string) (done bool, err error) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	mine := bson.D{{Key: "_id", Value: ckptID(s.id, name, next)}, byID(s.id), {Key: fCkptOwner, Value: owner}}
	ok, err := s.checkCkpt(cctx, view, name, base, next, strict)
	if err != nil || !ok {
		if _, derr := s.st.checkpoints.DeleteOne(cctx, append(mine, bson.E{Key: fCkptPending, Value: true})); derr != nil && err == nil {
			err = derr
		}
		if err != nil {
			return false, fmt.Errorf("check version %d before committing it: %w", next, err)
		}
		return false, nil
	}
	res, err := s.st.checkpoints.UpdateOne(cctx, append(mine, bson.E{Key: fCkptPending, Value: true}),
		bson.D{{Key: "$unset", Value: bson.D{{Key: fCkptPending, Value: ""}, {Key: fCkptOwner, Value: ""}}}})
	if err != nil {
		return false, fmt.Errorf("commit version %d: %w", next, committing(err))
	}
	if res.MatchedCount == 0 {
		return false, nil // taken over as abandoned meanwhile (see pendingTimeout)
	}
	if _, err := s.st.checkpoints.DeleteMany(cctx, s.ckptFilter(&name,
		bson.E{Key: fCkptVersion, Value: bson.D{{Key: "$lt", Value: next}}}, committed)); err != nil {
		slog.WarnContext(ctx, "mongo: could not delete a checkpoint's old versions; the next save deletes them",
			"collection", s.st.opts.CheckpointsCollection, "error", err)
	}
	return true, nil
}

// checkCkpt reports whether pending version next may commit, from one
// read of the versions from base up: base (when above 0) is committed
// (and, when strict, a live checkpoint, not a tombstone), and no committed
// version lies above next. Nobody builds on a pending version, so a
// committed version above next was there before next was inserted: next
// took the place of a version deleted as old, and its save is stale.
func (s *Session) checkCkpt(ctx context.Context, view *ckptView, name string, base, next int64, strict bool) (bool, error) {
	cur, err := s.st.checkpoints.Find(ctx, s.ckptFilter(&name,
		bson.E{Key: fCkptVersion, Value: bson.D{{Key: "$gte", Value: max(base, 1)}}}),
		options.Find().SetProjection(bson.D{{Key: fCkptDocument, Value: 0}}))
	if err != nil {
		return false, err
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var docs []ckptDoc
	if err := cur.All(ctx, &docs); err != nil {
		return false, err
	}
	baseOK := base == 0
	for i := range docs {
		d := &docs[i]
		switch {
		case d.Version > next && !d.Pending:
			return false, nil
		case d.Version == base && !d.Pending:
			baseOK = true
			if strict {
				c, err := view.current(ctx, d)
				if err != nil {
					return false, err
				}
				baseOK = c != nil
			}
		}
	}
	return baseOK, nil
}

// insertCkpt inserts version v of checkpoint name, pending (a tombstone
// when doc is nil); won is false when that version exists, committed. A
// version another save holds pending is waited for (at most pendingWait):
// once committed the insert has lost; deleted (that save conflicted), it
// is tried again. A pending version abandoned by a save that stopped
// before committing (older than pendingTimeout) is deleted, and the
// insert tried again.
func (s *Session) insertCkpt(ctx context.Context, name string, v int64, doc []byte, now time.Time, owner string) (won bool, err error) {
	id := ckptID(s.id, name, v)
	d := bson.D{
		{Key: "_id", Value: id},
		{Key: fSessionID, Value: s.id},
		{Key: fCkptName, Value: name},
		{Key: fCkptVersion, Value: v},
		{Key: fCkptPending, Value: true},
		{Key: fCkptOwner, Value: owner},
	}
	if doc != nil {
		d = append(d, bson.E{Key: fCkptDocument, Value: bson.Binary{Subtype: bson.TypeBinaryGeneric, Data: doc}})
	} else {
		d = append(d, bson.E{Key: fCkptDeleted, Value: true})
	}
	d = append(d, bson.E{Key: fUpdatedAt, Value: now})
	if s.st.opts.TTL > 0 {
		d = append(d, bson.E{Key: fExpiresAt, Value: now.Add(s.st.opts.TTL)})
	}
	start := time.Now()
	for attempt := 0; ; attempt++ {
		_, err = s.st.checkpoints.InsertOne(ctx, d)
		if err == nil {
			return true, nil
		}
		if !mongodrv.IsDuplicateKeyError(err) {
			return false, fmt.Errorf("insert version %d: %w", v, err)
		}
		// Version v is there: committed, the save conflicts; pending, a
		// save is in flight, and the answer waits for its outcome (so that
		// a conflict is only ever reported for a committed version).
		for {
			in, err := s.ckptAt(ctx, name, v)
			switch {
			case err != nil:
				return false, err
			case in == nil:
				// Deleted: its save conflicted. Insert again.
			case !in.Pending:
				return false, nil
			case s.st.now().Sub(in.UpdatedAt) >= pendingTimeout:
				res, err := s.st.checkpoints.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, byID(s.id),
					{Key: fCkptPending, Value: true}, {Key: fUpdatedAt, Value: in.UpdatedAt}})
				if err != nil {
					return false, err
				}
				if res.DeletedCount > 0 {
					slog.WarnContext(ctx, "mongo: deleted a checkpoint version a save left pending (it stopped before committing)",
						"session", s.id, "checkpoint", name, "version", v)
				}
			case time.Since(start) > pendingWait:
				return false, nil // still in flight: report the conflict it will most likely be
			default:
				if err := backoff(ctx, min(attempt, 8)); err != nil {
					return false, err
				}
				attempt++
				continue
			}
			break
		}
	}
}

// ckptAt reads version v of checkpoint name, by _id, committed or not;
// nil when there is none.
func (s *Session) ckptAt(ctx context.Context, name string, v int64) (*ckptDoc, error) {
	var d ckptDoc
	err := s.st.checkpoints.FindOne(ctx, bson.D{{Key: "_id", Value: ckptID(s.id, name, v)}, byID(s.id)},
		options.FindOne().SetProjection(bson.D{{Key: fCkptDocument, Value: 0}})).Decode(&d)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read version %d: %w", v, err)
	}
	return &d, nil
}

// topCkpt reads the newest committed version of checkpoint name (with its
// document when withDoc); nil when there is none.
func (s *Session) topCkpt(ctx context.Context, name string, withDoc bool) (*ckptDoc, error) {
	fo := options.FindOne().SetSort(bson.D{{Key: fCkptVersion, Value: -1}})
	if !withDoc {
		fo.SetProjection(bson.D{{Key: fCkptDocument, Value: 0}})
	}
	var d ckptDoc
	err := s.st.checkpoints.FindOne(ctx, s.ckptFilter(&name, committed), fo).Decode(&d)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the newest version: %w", err)
	}
	return &d, nil
}

// topCkpts reads the newest committed version of every checkpoint name of
// the session, without documents.
func (s *Session) topCkpts(ctx context.Context) (map[string]*ckptDoc, error) {
	cur, err := s.st.checkpoints.Find(ctx, s.ckptFilter(nil, committed),
		options.Find().SetProjection(bson.D{{Key: fCkptDocument, Value: 0}}))
	if err != nil {
		return nil, fmt.Errorf("read the checkpoints: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	tops := map[string]*ckptDoc{}
	for cur.Next(ctx) {
		var d ckptDoc
		if err := cur.Decode(&d); err != nil {
			return nil, fmt.Errorf("read the checkpoints: %w", err)
		}
		if t, ok := tops[d.Name]; !ok || d.Version > t.Version {
			tops[d.Name] = &d
		}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("read the checkpoints: %w", err)
	}
	return tops, nil
}

// ckptConflict is the conflict of a save or delete from version want,
// naming the version stored now (read for the message, 0 if it cannot be).
func (s *Session) ckptConflict(ctx context.Context, op, name string, want int64) error {
	var stored int64
	if top, err := s.topCkpt(ctx, name, false); err == nil {
		if cur, err := s.newCkptView().current(ctx, top); err == nil && cur != nil {
			stored = cur.Version
		}
	}
	return s.conflictAt(op, name, stored, want)
}

func (s *Session) conflictAt(op, name string, stored, want int64) error {
	return fmt.Errorf("mongo: %s checkpoint %q of session %q: %w: it is at version %d, not %d",
		op, name, s.id, session.ErrCheckpointConflict, stored, want)
}

// ckptExpiresIn returns the latest expiry of the session's live
// checkpoints, for ExpiresIn on a session whose session document has no
// live expiry; ok is false when there is none.
func (s *Session) ckptExpiresIn(ctx context.Context) (time.Duration, bool, error) {
	view := s.newCkptView()
	tops, err := s.topCkpts(ctx)
	if err != nil {
		return 0, false, err
	}
	var last time.Time
	for _, d := range tops {
		if d.Deleted || d.ExpiresAt == nil || !d.ExpiresAt.After(view.now) {
			continue
		}
		if d.ExpiresAt.After(last) {
			last = *d.ExpiresAt
		}
	}
	if last.IsZero() {
		return 0, false, nil
	}
	return last.Sub(view.now), true, nil
}

// dropExpiredCkpts deletes the checkpoint versions a restart of the
// expired session ended: those whose expiry lies below through. Best
// effort: they are hidden already.
func (s *Session) dropExpiredCkpts(ctx context.Context, through time.Time) {
	if _, err := s.st.checkpoints.DeleteMany(ctx, s.ckptFilter(nil,
		bson.E{Key: fExpiresAt, Value: bson.D{{Key: "$lt", Value: through}}})); err != nil {
		slog.WarnContext(ctx, "mongo: could not delete an expired session's checkpoints; they stay hidden",
			"collection", s.st.opts.CheckpointsCollection, "error", err)
	}
}

// ensureCheckpointIndexes creates the checkpoints collection's index
// {session_id, name, version} once per Store, on the first checkpoint
// write (one index per command, serialised and retried as ensureIndexes
// does, for FerretDB).
func (st *Store) ensureCheckpointIndexes(ctx context.Context) error {
	st.idxMu.Lock()
	done := st.ckIdxDone
	st.idxMu.Unlock()
	if done {
		return nil
	}
	indexMu.Lock()
	defer indexMu.Unlock()
	return st.createCheckpointIndex(ctx)
}

// createCheckpointIndex makes the checkpoints index; the caller holds
// indexMu. ensureIndexes makes it with the others, so that a store's
// first use creates every collection and index the adapter has.
func (st *Store) createCheckpointIndex(ctx context.Context) error {
	if err := retryNetwork(ctx, func() error {
		_, err := st.checkpoints.Indexes().CreateOne(ctx, mongodrv.IndexModel{
			Keys: bson.D{{Key: fSessionID, Value: 1}, {Key: fCkptName, Value: 1}, {Key: fCkptVersion, Value: -1}},
		})
		return err
	}); err != nil {
		return fmt.Errorf("create the {session_id, name, version} index: %w", err)
	}
	st.idxMu.Lock()
	st.ckIdxDone = true
	st.idxMu.Unlock()
	return nil
}

// newOwner returns a save's owner token: random, so that no other save
// ever holds it.
func newOwner() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("owner token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// validCheckpointName refuses the empty name, and a name that is not
// valid UTF-8 (BSON strings are UTF-8: the driver would store it altered).
func validCheckpointName(name string) error {
	if err := driver.ValidateCheckpointName(name); err != nil {
		return fmt.Errorf("mongo: %w", err)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("mongo: %w: checkpoint name %q is not valid UTF-8, which BSON strings must be", session.ErrInvalidSessionID, name)
	}
	return nil
}
