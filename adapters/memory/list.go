package memory

import (
	"context"
	"fmt"
	"sort"

	"github.com/agentsessions/sessions/adapters"
)

var _ adapters.PageLister = (*urlStore)(nil)

// ListSessionsPage lists, sorted, at most limit of the sessions holding
// items or checkpoints whose id comes after cursor (adapters.PageLister);
// the cursor is the last id listed. It looks at every session for each
// page, and sorts only those after the cursor.
func (st *Store) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("memory: list sessions: limit %d is not positive", limit)
	}
	if err := st.lock(); err != nil {
		return nil, "", err
	}
	now := st.opts.Now()
	var ids []string
	for id, h := range st.data {
		if id > cursor && (len(h.records) > 0 || len(h.checkpoints) > 0) && (h.expires.IsZero() || now.Before(h.expires)) {
			ids = append(ids, id)
		}
	}
	st.mu.Unlock()
	sort.Strings(ids)
	if len(ids) <= limit {
		return ids, "", nil
	}
	ids = ids[:limit:limit]
	return ids, ids[limit-1], nil
}

// ListSessionsPage lists a page of the sessions holding items or
// checkpoints, sorted (adapters.PageLister).
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	return s.st.ListSessionsPage(ctx, cursor, limit)
}
