package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

var _ adapters.PageLister = (*urlStore)(nil)

// ListSessionsPage lists at most limit of the sessions holding rows or
// checkpoints, in the order of their stored ids, after cursor
// (adapters.PageLister): the cursor is the stored id of the last session
// listed. Each page is one statement on the primary keys of the sessions
// and checkpoints tables.
func (st *Store) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if err := st.check(ctx); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("postgres: list sessions: limit %d is not positive", limit)
	}
	q := st.q.listPage
	if ok, err := st.checkpointsReady(ctx, false); err != nil {
		return nil, "", st.wrap(ctx, "list sessions", err)
	} else if ok {
		q = st.q.listPageCk
	}
	rows, err := st.pool.Query(ctx, q, cursor, limit)
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

// ListSessionsPage lists a page of the sessions holding rows or
// checkpoints (adapters.PageLister).
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	return s.st.ListSessionsPage(ctx, cursor, limit)
}

var _ adapters.Summarizer = (*urlStore)(nil)

// SummarizeSessions summarizes the sessions ids (adapters.Summarizer) with
// three statements, whatever their number: their rows (each decoded as
// Items decodes it), their session rows' updated_at, their checkpoints.
// Unreadable rows are counted, not reported to Options.OnCorrupt (a read
// of the session reports each).
func (st *Store) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	if err := st.check(ctx); err != nil {
		return nil, err
	}
	out := make([]adapters.SessionSummary, len(ids))
	at := make(map[string]int, len(ids)) // by stored id
	stored := make([]string, 0, len(ids))
	for i, id := range ids {
		out[i].ID = id
		sid := storedID(id)
		if _, dup := at[sid]; !dup {
			at[sid] = i
			stored = append(stored, sid)
		}
	}
	if len(stored) > 0 {
		if err := st.summarize(ctx, stored, out, at, each); err != nil {
			return nil, st.wrap(ctx, "summarize sessions", err)
		}
	}
	for i, id := range ids {
		if j := at[storedID(id)]; j != i {
			out[i] = out[j]
		}
	}
	return out, nil
}

func (st *Store) summarize(ctx context.Context, stored []string, out []adapters.SessionSummary, at map[string]int, each func(string, session.Item)) error {
	rows, err := st.pool.Query(ctx, `SELECT session_id, message_data FROM `+st.q.messages+
		` WHERE session_id = ANY($1) ORDER BY session_id, created_at, id`, stored)
	if err != nil {
		return err
	}
	var dec driver.Decoder
	for rows.Next() {
		vals := rows.RawValues()
		i, ok := at[string(vals[0])]
		if !ok {
			continue
		}
		it, err := decodeStored(&dec, string(vals[1]))
		if err != nil {
			out[i].Unreadable++
			continue
		}
		out[i].Items++
		out[i].Bytes += int64(len(it.Bytes()))
		if each != nil {
			each(out[i].ID, it)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	rows, err = st.pool.Query(ctx, `SELECT session_id, updated_at FROM `+st.q.sessions+` WHERE session_id = ANY($1)`, stored)
	if err != nil {
		return err
	}
	for rows.Next() {
		var (
			sid     string
			updated *time.Time
		)
		if err := rows.Scan(&sid, &updated); err != nil {
			rows.Close()
			return err
		}
		if i, ok := at[sid]; ok && updated != nil {
			out[i].Updated = *updated
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	if ok, err := st.checkpointsReady(ctx, false); err != nil || !ok {
		return err
	}
	rows, err = st.pool.Query(ctx, `SELECT session_id, name, version, document FROM `+st.q.ck.table+` WHERE session_id = ANY($1)`, stored)
	if err != nil {
		return err
	}
	touched := map[int]bool{}
	for rows.Next() {
		var (
			sid string
			c   adapters.StoredCheckpoint
		)
		if err := rows.Scan(&sid, &c.Name, &c.Version, &c.Document); err != nil {
			rows.Close()
			return err
		}
		c.Name = sessionID(c.Name)
		if c.Document == nil {
			c.Document = []byte{}
		}
		if i, ok := at[sid]; ok {
			out[i].Checkpoints = append(out[i].Checkpoints, c)
			touched[i] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range touched {
		// sorted as ListCheckpoints sorts them, whatever the collation
		sort.Slice(out[i].Checkpoints, func(a, b int) bool { return out[i].Checkpoints[a].Name < out[i].Checkpoints[b].Name })
	}
	return nil
}

// SummarizeSessions summarizes a page of sessions (adapters.Summarizer)
// with three statements.
func (s *urlStore) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	return s.st.SummarizeSessions(ctx, ids, each)
}
