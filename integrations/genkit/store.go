package genkit

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/core/status"
	"github.com/google/uuid"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// Checkpoint names the Store keeps its documents under: a snapshot's row in
// the snapshot's session, a conversation's index in the conversation's
// session.
const (
	SnapshotName = "genkit-snapshot"
	IndexName    = "genkit-index"
)

// DefaultSnapshotPrefix is the prefix of the session ids that hold one
// snapshot each, unless Options.SnapshotPrefix says otherwise.
const DefaultSnapshotPrefix = "genkit-snapshot:"

// DefaultAttempts is how many times SaveSnapshot loads a row, applies its
// function and saves, when the row keeps changing under it, unless
// Options.Attempts says otherwise.
const DefaultAttempts = 8

// DefaultPollInterval is how often a status subscription re-reads its
// snapshot, unless Options.PollInterval says otherwise (genkit's file
// store polls at the same rate).
const DefaultPollInterval = time.Second

var (
	// ErrNoCheckpoints reports sessions that do not keep checkpoints (they
	// do not implement session.CheckpointStore): New returns it for a store
	// whose declared capabilities lack session.CapCheckpoints, and every
	// method of a Store made with NewFunc for a session that lacks them.
	ErrNoCheckpoints = errors.New("genkit: the store's sessions do not keep checkpoints (session.CheckpointStore)")

	// ErrSnapshotConflict reports a SaveSnapshot that found the row changed
	// under it on every one of its attempts (Options.Attempts): nothing was
	// written. It is a genkit status error (status.ErrAborted, the code for
	// a lost concurrency race), and the error returned also wraps
	// session.ErrCheckpointConflict, so errors.Is matches all three.
	ErrSnapshotConflict = status.ErrAborted.Subtype("genkit: snapshot changed concurrently")

	// ErrCorruptSnapshot reports a stored document that is not what the
	// Store writes (not JSON of the expected shape, or a row whose
	// snapshot id is not the one it is stored under). The document is left
	// as it is; it is a genkit status error (status.ErrDataLoss).
	ErrCorruptSnapshot = status.ErrDataLoss.Subtype("genkit: corrupt stored snapshot")
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// SessionPrefix maps a genkit session id s to the id of the session
	// that keeps its index, SessionPrefix+s. Empty (the default) keeps the
	// index in the session of the same id, beside that session's history.
	SessionPrefix string
	// SnapshotPrefix maps a snapshot id x to the id of the session that
	// keeps its row, SnapshotPrefix+x; DefaultSnapshotPrefix when empty.
	// A row and an index never clash, even in one session: their
	// checkpoint names differ.
	SnapshotPrefix string
	// Attempts bounds SaveSnapshot's load, apply, compare-and-set rounds
	// (DefaultAttempts when 0). With 1, a writer whose row changed since
	// its load gets ErrSnapshotConflict instead of applying its function
	// again to the new row.
	Attempts int
	// PollInterval is how often OnSnapshotStatusChange re-reads a
	// snapshot; DefaultPollInterval when 0.
	PollInterval time.Duration
}

// Store is genkit's exp.SessionStore and exp.SnapshotSubscriber over the
// checkpoints a session store's sessions keep (session.CheckpointStore).
// It holds no state of its own beyond its options: any number of Stores,
// in any number of processes, over one session store see the same
// snapshots, and SaveSnapshot is a compare-and-set among all of them.
type Store[State any] struct {
	open func(id string) (session.Session, error)
	opts Options
}

var (
	_ exp.SessionStore[any]  = (*Store[any])(nil)
	_ exp.SnapshotSubscriber = (*Store[any])(nil)
)

// New returns a Store over st's sessions. It fails with an error wrapping
// ErrNoCheckpoints when st's sessions do not keep checkpoints. The Store
// does not own st: close st when done with the Store.
func New[State any](st adapters.Store, opts Options) (*Store[State], error) {
	if st == nil {
		return nil, errors.New("genkit: nil store")
	}
	if caps := st.Declared(); !caps.Has(session.CapCheckpoints) {
		return nil, fmt.Errorf("%w: the store declares %v", ErrNoCheckpoints, caps)
	}
	return NewFunc[State](st.Session, opts)
}

// NewFunc returns a Store over the sessions open returns: wrapped sessions
// (encrypted, otelsession) or any other source. A session that does not
// implement session.CheckpointStore fails the call that opened it with an
// error wrapping ErrNoCheckpoints.
func NewFunc[State any](open func(id string) (session.Session, error), opts Options) (*Store[State], error) {
	if open == nil {
		return nil, errors.New("genkit: nil open function")
	}
	if opts.SnapshotPrefix == "" {
		opts.SnapshotPrefix = DefaultSnapshotPrefix
	}
	if opts.Attempts < 0 {
		return nil, fmt.Errorf("genkit: Attempts is %d, want 0 (the default) or more", opts.Attempts)
	}
	if opts.Attempts == 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("genkit: PollInterval is %v, want 0 (the default) or more", opts.PollInterval)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	return &Store[State]{open: open, opts: opts}, nil
}

// SnapshotSessionID returns the id of the session that keeps snapshotID's
// row.
func (s *Store[State]) SnapshotSessionID(snapshotID string) string {
	return s.opts.SnapshotPrefix + snapshotID
}

// IndexSessionID returns the id of the session that keeps the index of
// genkit session sessionID.
func (s *Store[State]) IndexSessionID(sessionID string) string {
	return s.opts.SessionPrefix + sessionID
}

func (s *Store[State]) checkpoints(id string) (session.CheckpointStore, error) {
	ss, err := s.open(id)
	if err != nil {
		return nil, fmt.Errorf("genkit: open session %q: %w", id, err)
	}
	cs, ok := ss.(session.CheckpointStore)
	if !ok {
		return nil, fmt.Errorf("%w: session %q is a %T", ErrNoCheckpoints, id, ss)
	}
	return cs, nil
}

// loadRow returns snapshotID's row and its version; (nil, 0) when there is
// none.
func (s *Store[State]) loadRow(ctx context.Context, cs session.CheckpointStore, snapshotID string) (*exp.SessionSnapshot[State], int64, error) {
	doc, version, err := cs.LoadCheckpoint(ctx, SnapshotName)
	if errors.Is(err, session.ErrNoCheckpoint) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("genkit: load snapshot %q: %w", snapshotID, err)
	}
	snap, err := decodeSnapshot[State](doc, snapshotID)
	if err != nil {
		return nil, 0, err
	}
	return snap, version, nil
}

// GetSnapshot returns the snapshot stored under snapshotID, or nil if there
// is none.
func (s *Store[State]) GetSnapshot(ctx context.Context, snapshotID string) (*exp.SessionSnapshot[State], error) {
	if snapshotID == "" {
		return nil, nil
	}
	cs, err := s.checkpoints(s.SnapshotSessionID(snapshotID))
	if err != nil {
		return nil, err
	}
	snap, _, err := s.loadRow(ctx, cs, snapshotID)
	return snap, err
}

// GetLatestSnapshot returns the session's snapshot with the greatest
// CreatedAt (ties broken by the greater SnapshotID), whatever its status,
// or nil if the session has none; an error if sessionID is empty. It reads
// the session's index and the newest row the index lists that exists: an
// entry whose row is missing (a save that never completed) is passed
// over. A corrupt newest row is an error, not a reason to answer with an
// older snapshot.
func (s *Store[State]) GetLatestSnapshot(ctx context.Context, sessionID string) (*exp.SessionSnapshot[State], error) {
	if sessionID == "" {
		return nil, status.Errorf(exp.ErrSessionIDRequired, "genkit: GetLatestSnapshot: empty session id")
	}
	ics, err := s.checkpoints(s.IndexSessionID(sessionID))
	if err != nil {
		return nil, err
	}
	idx, _, err := s.loadIndex(ctx, ics, sessionID)
	if err != nil {
		return nil, err
	}
	for i := len(idx.Snapshots) - 1; i >= 0; i-- {
		snap, err := s.GetSnapshot(ctx, idx.Snapshots[i].ID)
		if err != nil {
			return nil, err
		}
		if snap != nil && snap.SessionID == sessionID {
			return snap, nil
		}
	}
	return nil, nil
}

// SaveSnapshot reads the row at snapshotID (nil if there is none, or if
// snapshotID is empty: a new id is generated), applies fn, and stores what
// fn returns if the row is still the one read: a compare-and-set on the
// row's checkpoint version. When another writer saved the row in between,
// fn runs again on the new row, up to Options.Attempts times; then the
// call fails with ErrSnapshotConflict and writes nothing. fn returning
// (nil, nil) writes nothing and returns (nil, nil).
//
// As genkit's contract says, the store owns identity only: SnapshotID is
// the id saved under, SessionID is the existing row's when there is one
// (a new row must carry one: exp.ErrSessionIDRequired), an empty Status
// is stored as completed, and the timestamps are stored as fn set them.
//
// Each save first makes sure the session's index lists the row with fn's
// CreatedAt (a read, and a write only for a new row or a moved CreatedAt),
// then writes the row, so a reader never sees a saved row the index
// misses; a save that fails in between leaves an index entry without a
// row, which readers pass over.
func (s *Store[State]) SaveSnapshot(
	ctx context.Context,
	snapshotID string,
	fn func(existing *exp.SessionSnapshot[State]) (*exp.SessionSnapshot[State], error),
) (*exp.SessionSnapshot[State], error) {
	if fn == nil {
		return nil, status.Errorf(status.ErrInvalidArgument, "genkit: SaveSnapshot: nil function")
	}
	if snapshotID == "" {
		snapshotID = uuid.NewString()
	}
	if !utf8.ValidString(snapshotID) {
		// JSON would store another id, and the row could not be found.
		return nil, status.Errorf(status.ErrInvalidArgument, "genkit: save snapshot %q: the id is not valid UTF-8", snapshotID)
	}
	cs, err := s.checkpoints(s.SnapshotSessionID(snapshotID))
	if err != nil {
		return nil, err
	}
	var conflict error
	for attempt := 0; attempt < s.opts.Attempts; attempt++ {
		existing, version, err := s.loadRow(ctx, cs, snapshotID)
		if err != nil {
			return nil, err
		}
		next, err := fn(existing)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return nil, nil
		}
		next.SnapshotID = snapshotID
		if existing != nil && existing.SessionID != "" {
			next.SessionID = existing.SessionID
		}
		if next.SessionID == "" {
			return nil, status.Errorf(exp.ErrSessionIDRequired, "genkit: save snapshot %q: the snapshot has no session id", snapshotID)
		}
		if !utf8.ValidString(next.SessionID) {
			return nil, status.Errorf(status.ErrInvalidArgument, "genkit: save snapshot %q: session id %q is not valid UTF-8", snapshotID, next.SessionID)
		}
		if next.Status == "" {
			next.Status = exp.SnapshotStatusCompleted
		}
		doc, err := encodeSnapshot(next)
		if err != nil {
			return nil, err
		}
		if err := s.addToIndex(ctx, next.SessionID, indexEntry{ID: snapshotID, CreatedAt: next.CreatedAt}); err != nil {
			return nil, err
		}
		_, err = cs.SaveCheckpoint(ctx, SnapshotName, doc, version)
		if errors.Is(err, session.ErrCheckpointConflict) {
			conflict = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("genkit: save snapshot %q: %w", snapshotID, err)
		}
		return next, nil
	}
	return nil, status.Errorf(ErrSnapshotConflict, "genkit: save snapshot %q: the row changed under it on all %d attempts: %w",
		snapshotID, s.opts.Attempts, conflict)
}

func (s *Store[State]) loadIndex(ctx context.Context, cs session.CheckpointStore, sessionID string) (index, int64, error) {
	doc, version, err := cs.LoadCheckpoint(ctx, IndexName)
	if errors.Is(err, session.ErrNoCheckpoint) {
		return index{}, 0, nil
	}
	if err != nil {
		return index{}, 0, fmt.Errorf("genkit: load the index of session %q: %w", sessionID, err)
	}
	idx, err := decodeIndex(doc)
	if err != nil {
		return index{}, 0, fmt.Errorf("session %q: %w", sessionID, err)
	}
	return idx, version, nil
}

// addToIndex records e in sessionID's index (replacing the entry of the
// same id), retrying while other writers change the index: additions
// commute, so a conflict here is never the caller's to see.
func (s *Store[State]) addToIndex(ctx context.Context, sessionID string, e indexEntry) error {
	cs, err := s.checkpoints(s.IndexSessionID(sessionID))
	if err != nil {
		return err
	}
	for {
		idx, version, err := s.loadIndex(ctx, cs, sessionID)
		if err != nil {
			return err
		}
		if !idx.put(e) {
			return nil
		}
		doc, err := encodeIndex(idx)
		if err != nil {
			return err
		}
		_, err = cs.SaveCheckpoint(ctx, IndexName, doc, version)
		if errors.Is(err, session.ErrCheckpointConflict) {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("genkit: index snapshot %q in session %q: %w", e.ID, sessionID, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("genkit: index snapshot %q in session %q: %w", e.ID, sessionID, err)
		}
		return nil
	}
}

// OnSnapshotStatusChange returns a channel that yields snapshotID's status
// at subscription time and then whenever a re-read (every
// Options.PollInterval) finds it changed, whoever wrote it, until ctx is
// done; then the channel is closed. A snapshot that does not exist, or
// cannot be read, when the subscription starts gets a closed channel. A
// slow reader may miss intermediate statuses but always sees the latest;
// a read that fails later is retried at the next tick.
func (s *Store[State]) OnSnapshotStatusChange(ctx context.Context, snapshotID string) <-chan exp.SnapshotStatus {
	ch := make(chan exp.SnapshotStatus, 1)
	snap, err := s.GetSnapshot(ctx, snapshotID)
	if err != nil || snap == nil {
		close(ch)
		return ch
	}
	last := snap.Status
	ch <- last
	go func() {
		defer close(ch)
		tick := time.NewTicker(s.opts.PollInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			snap, err := s.GetSnapshot(ctx, snapshotID)
			if err != nil || snap == nil || snap.Status == last {
				continue
			}
			last = snap.Status
			select {
			case <-ch:
			default:
			}
			ch <- last
		}
	}()
	return ch
}
