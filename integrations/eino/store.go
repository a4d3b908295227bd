package eino

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/compose"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// DefaultName is the checkpoint name a Store keeps eino's checkpoints under
// in each session, unless WithName says otherwise.
const DefaultName = "eino"

// ErrNoCheckpoints reports sessions that do not keep checkpoints (they do
// not implement session.CheckpointStore): New returns it for a store whose
// Declared capabilities lack session.CapCheckpoints, and every method of a
// Store made with NewFunc for a session that lacks them.
var ErrNoCheckpoints = errors.New("eino: the store's sessions do not keep checkpoints (session.CheckpointStore)")

// Deleter is eino's optional CheckPointDeleter, as eino declares it from
// v0.9 on (compose.CheckPointDeleter; TurnLoop calls it once a resumed turn
// has consumed its checkpoint). eino v0.7.36 has no such interface; a Store
// implements it either way.
type Deleter interface {
	Delete(ctx context.Context, checkPointID string) error
}

// Store is eino's CheckPointStore (and CheckPointDeleter) over a session
// store's checkpoints. It is safe for concurrent use; it holds no state of
// its own beyond its options, so any number of Stores (in any number of
// processes) over one session store see the same checkpoints.
type Store struct {
	open        func(id string) (session.Session, error)
	sessionID   func(checkPointID string) string
	name        string
	deleteOnGet bool
}

var (
	_ compose.CheckPointStore = (*Store)(nil)
	_ Deleter                 = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithPrefix maps eino's checkpoint id c to the session id prefix+c. The
// default prefix is empty: the checkpoint lives in the session of the same
// id, beside that session's history if it has one.
func WithPrefix(prefix string) Option {
	return func(s *Store) { s.sessionID = func(c string) string { return prefix + c } }
}

// WithSessionID maps eino's checkpoint id to a session id with f, for
// mappings a prefix cannot express. f must be deterministic: Get must find
// the session Set wrote. It replaces WithPrefix, and WithPrefix replaces it:
// the last one given wins.
func WithSessionID(f func(checkPointID string) string) Option {
	return func(s *Store) { s.sessionID = f }
}

// WithName sets the checkpoint name the documents are stored under in each
// session; default DefaultName ("eino"). Other names in the same session
// (runstate's, another framework's) are untouched.
func WithName(name string) Option {
	return func(s *Store) { s.name = name }
}

// DeleteOnGet makes Get delete the checkpoint it returns, so that a
// checkpoint is consumed by the resume that reads it: eino's Runner reads
// its checkpoint exactly once per Resume, and saves a new one if the
// resumed run interrupts again. The delete names the version Get read, so
// a checkpoint saved in between (a newer interrupt) is kept.
//
// The price: from that Get on, the checkpoint exists only in the resumed
// run's memory. If the process dies mid-resume, the interrupt cannot be
// resumed again. Where that matters, leave DeleteOnGet off and call Delete
// once the resumed run has finished without a new interrupt (as eino's
// TurnLoop does with a CheckPointDeleter from v0.9 on).
func DeleteOnGet() Option {
	return func(s *Store) { s.deleteOnGet = true }
}

// New returns a Store over st's sessions. It fails with an error wrapping
// ErrNoCheckpoints when st's sessions do not keep checkpoints. The Store
// does not own st: close st when done with the Store.
func New(st adapters.Store, opts ...Option) (*Store, error) {
	if st == nil {
		return nil, errors.New("eino: nil store")
	}
	if caps := st.Declared(); !caps.Has(session.CapCheckpoints) {
		return nil, fmt.Errorf("%w: the store declares %v", ErrNoCheckpoints, caps)
	}
	return NewFunc(st.Session, opts...), nil
}

// NewFunc returns a Store over the sessions open returns (open must not be
// nil): wrapped sessions (encrypted, otelsession) or any other source. Each
// call opens the session of the checkpoint id it is given; a session that
// does not implement session.CheckpointStore fails the call with an error
// wrapping ErrNoCheckpoints.
func NewFunc(open func(id string) (session.Session, error), opts ...Option) *Store {
	s := &Store{open: open, sessionID: func(c string) string { return c }, name: DefaultName}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SessionID returns the id of the session that keeps checkPointID's
// checkpoint.
func (s *Store) SessionID(checkPointID string) string { return s.sessionID(checkPointID) }

// Name returns the checkpoint name the Store uses in each session.
func (s *Store) Name() string { return s.name }

// Session returns the session that keeps checkPointID's checkpoint, as a
// session.CheckpointStore (to list, inspect or expire it).
func (s *Store) Session(checkPointID string) (session.CheckpointStore, error) {
	id := s.sessionID(checkPointID)
	ss, err := s.open(id)
	if err != nil {
		return nil, fmt.Errorf("eino: checkpoint %q: open session %q: %w", checkPointID, id, err)
	}
	cs, ok := ss.(session.CheckpointStore)
	if !ok {
		return nil, fmt.Errorf("%w: session %q is a %T", ErrNoCheckpoints, id, ss)
	}
	return cs, nil
}

// Get returns the checkpoint stored for checkPointID. A checkpoint that is
// not there (never saved, deleted, or expired with its session) is
// (nil, false, nil), as eino expects.
func (s *Store) Get(ctx context.Context, checkPointID string) ([]byte, bool, error) {
	cs, err := s.Session(checkPointID)
	if err != nil {
		return nil, false, err
	}
	doc, version, err := cs.LoadCheckpoint(ctx, s.name)
	if errors.Is(err, session.ErrNoCheckpoint) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eino: get checkpoint %q: %w", checkPointID, err)
	}
	if s.deleteOnGet {
		err := cs.DeleteCheckpoint(ctx, s.name, version)
		if err != nil && !errors.Is(err, session.ErrCheckpointConflict) {
			// The checkpoint is still there: failing the Get keeps "read"
			// and "consumed" one step, and the caller may retry.
			return nil, false, fmt.Errorf("eino: get checkpoint %q: delete once read: %w", checkPointID, err)
		}
		// A conflict: a newer checkpoint was saved since the load. It is
		// not this read's to delete; the document read is still the one
		// asked for.
	}
	return doc, true, nil
}

// Set stores checkPoint for checkPointID, replacing whatever is stored
// (session.AnyVersion: eino has no versions). Where the session store
// expires data (a ttl= option), the checkpoint expires with its session,
// and Set restarts the session's clock.
func (s *Store) Set(ctx context.Context, checkPointID string, checkPoint []byte) error {
	cs, err := s.Session(checkPointID)
	if err != nil {
		return err
	}
	if _, err := cs.SaveCheckpoint(ctx, s.name, checkPoint, session.AnyVersion); err != nil {
		return fmt.Errorf("eino: set checkpoint %q: %w", checkPointID, err)
	}
	return nil
}

// Delete removes the checkpoint stored for checkPointID, whatever its
// version. Deleting one that is not there succeeds. Only the checkpoint
// goes: the session's history and other checkpoints stay.
func (s *Store) Delete(ctx context.Context, checkPointID string) error {
	cs, err := s.Session(checkPointID)
	if err != nil {
		return err
	}
	if err := cs.DeleteCheckpoint(ctx, s.name, session.AnyVersion); err != nil {
		return fmt.Errorf("eino: delete checkpoint %q: %w", checkPointID, err)
	}
	return nil
}
