package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

var _ session.CheckpointCommitter = (*Session)(nil)

// checkpoint is one stored checkpoint of a session.
type checkpoint struct {
	doc     []byte
	version int64
}

// LoadCheckpoint returns the checkpoint stored under name and its version.
func (s *Session) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := s.st.lock(); err != nil {
		return nil, 0, err
	}
	defer s.st.mu.Unlock()
	h := s.lookup(false)
	if h == nil {
		return nil, 0, session.ErrNoCheckpoint
	}
	c, ok := h.checkpoints[name]
	if !ok {
		return nil, 0, session.ErrNoCheckpoint
	}
	if s.st.opts.RefreshOnRead {
		s.touch(h)
	}
	return append([]byte(nil), c.doc...), c.version, nil
}

// SaveCheckpoint stores doc under name if the stored version is version.
func (s *Session) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	return s.AppendWithCheckpoint(ctx, nil, name, doc, version)
}

// AppendWithCheckpoint appends items and saves doc under name, atomically.
func (s *Session) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	if err := validCheckpoint(name, doc); err != nil {
		return 0, err
	}
	recs, err := records(items)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.st.lock(); err != nil {
		return 0, err
	}
	defer s.st.mu.Unlock()
	h := s.lookup(true)
	c, ok := h.checkpoints[name]
	if version != session.AnyVersion && version != c.version {
		if !ok && h.unused() {
			delete(s.st.data, s.id)
		}
		return 0, fmt.Errorf("%w: checkpoint %q of session %q is at version %d, not %d", session.ErrCheckpointConflict, name, s.id, c.version, version)
	}
	if h.checkpoints == nil {
		h.checkpoints = map[string]checkpoint{}
	}
	next := c.version + 1
	h.checkpoints[name] = checkpoint{doc: append([]byte(nil), doc...), version: next}
	h.records = append(h.records, s.st.stored(recs)...)
	s.st.changed(h)
	s.touch(h)
	return next, nil
}

// DeleteCheckpoint removes the checkpoint under name if its version is
// version.
func (s *Session) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.st.lock(); err != nil {
		return err
	}
	defer s.st.mu.Unlock()
	h := s.lookup(false)
	var c checkpoint
	if h != nil {
		c = h.checkpoints[name]
	}
	if version != session.AnyVersion && version != c.version {
		return fmt.Errorf("%w: checkpoint %q of session %q is at version %d, not %d", session.ErrCheckpointConflict, name, s.id, c.version, version)
	}
	if h != nil {
		delete(h.checkpoints, name)
		if h.unused() {
			delete(s.st.data, s.id)
		}
	}
	return nil
}

// ListCheckpoints returns the names of the session's checkpoints, sorted.
func (s *Session) ListCheckpoints(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.st.lock(); err != nil {
		return nil, err
	}
	defer s.st.mu.Unlock()
	names := []string{}
	if h := s.lookup(false); h != nil {
		for n := range h.checkpoints {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// validCheckpoint refuses an empty name or document.
func validCheckpoint(name string, doc []byte) error {
	if err := driver.ValidateCheckpoint(name, doc); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}
