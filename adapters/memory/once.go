package memory

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// AddItemsOnce appends items as one batch unless opID was already used in
// this session, recording opID with it. Operation ids outlive Clear, PopItem
// and replaces; RemoveSession and expiry remove them with the session.
func (s *Session) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	if opID == "" {
		return false, session.ErrInvalidOperationID
	}
	recs, err := records(items)
	if err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := s.st.lock(); err != nil {
		return false, err
	}
	defer s.st.mu.Unlock()
	h := s.lookup(true)
	if h.ops[opID] {
		return false, nil
	}
	if h.ops == nil {
		h.ops = map[string]bool{}
	}
	h.ops[opID] = true
	if len(recs) > 0 {
		h.records = append(h.records, s.st.stored(recs)...)
		s.st.changed(h)
	}
	s.touch(h)
	return true, nil
}
