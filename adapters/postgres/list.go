package postgres

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
)

var _ adapters.PageLister = (*urlStore)(nil)

// ListSessionsPage lists at most limit of the sessions holding rows, in
// the order of their stored ids, after cursor (adapters.PageLister): the
// cursor is the stored id of the last session listed. Each page is one
// statement on the sessions table's primary key.
func (st *Store) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if err := st.check(ctx); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("postgres: list sessions: limit %d is not positive", limit)
	}
	rows, err := st.pool.Query(ctx, st.q.listPage, cursor, limit)
	if err != nil {
		return nil, "", st.wrap(ctx, "list sessions", err)
	}
	defer rows.Close()
	ids := make([]string, 0, min(limit, 1024))
	last := ""
	for rows.Next() {
		if err := rows.Scan(&last); err != nil {
			return nil, "", st.wrap(ctx, "list sessions", err)
		}
		ids = append(ids, sessionID(last))
	}
	if err := rows.Err(); err != nil {
		return nil, "", st.wrap(ctx, "list sessions", err)
	}
	if len(ids) < limit {
		last = ""
	}
	return ids, last, nil
}

// ListSessionsPage lists a page of the sessions holding rows
// (adapters.PageLister).
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	return s.st.ListSessionsPage(ctx, cursor, limit)
}
