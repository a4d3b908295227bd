package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// Listing a page of sessions, and summarizing a page, for stores of any
// size: each is a fixed number of statements per page, through the
// (session_id, id) index, never a statement per session.

var (
	_ adapters.PageLister = (*urlStore)(nil)
	_ adapters.Summarizer = (*urlStore)(nil)
)

// maxPageIDs bounds the ids bound into one statement of SummarizeSessions
// (SQLite builds before 3.32 allow 999 parameters).
const maxPageIDs = 500

// ListSessionsPage lists, sorted, at most limit of the sessions holding
// items or checkpoints whose id comes after cursor (adapters.PageLister);
// the cursor of the next page is the last id listed.
func (st *Store) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if err := st.check(ctx); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("sqlite: list sessions: limit %d is not positive", limit)
	}
	q, err := st.listQuery(ctx, ` WHERE session_id > ?1`, ` LIMIT ?2`)
	if err != nil {
		return nil, "", st.wrap(ctx, "list sessions", err)
	}
	rows, err := st.db.QueryContext(ctx, q, cursor, limit)
	if err != nil {
		return nil, "", st.wrap(ctx, "list sessions", err)
	}
	ids := make([]string, 0, min(limit, 1024))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, "", st.wrap(ctx, "list sessions", err)
		}
		ids = append(ids, id)
	}
	if err := closeRows(rows); err != nil {
		return nil, "", st.wrap(ctx, "list sessions", err)
	}
	next := ""
	if len(ids) == limit {
		next = ids[len(ids)-1]
	}
	return ids, next, nil
}

// listQuery returns the statement listing the sessions holding items or
// checkpoints (a session may hold checkpoints and no items), sorted, each
// once, with where applied to both tables and tail after the ORDER BY.
// Without a checkpoints table it lists the sessions holding items.
func (st *Store) listQuery(ctx context.Context, where, tail string) (string, error) {
	m := quote(st.q.messages)
	ok, err := st.checkpointsReady(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		return `SELECT DISTINCT session_id FROM ` + m + where + ` ORDER BY session_id` + tail, nil
	}
	// A compound SELECT ordered on its column: SQLite merges the two
	// index scans (MERGE (UNION)) and stops at the LIMIT, as the listing
	// of one table does.
	return `SELECT session_id FROM ` + m + where + ` UNION SELECT session_id FROM ` +
		quote(st.q.ck.table) + where + ` ORDER BY 1` + tail, nil
}

// SummarizeSessions summarizes the sessions ids (adapters.Summarizer) with
// three statements for every 500 ids: their rows, decoded as Items decodes
// them; their session rows' updated_at; their checkpoints. The rows of
// sorted ids that span few other sessions, as a page ListSessionsPage
// listed does, are read as one range of the index (and a fourth statement
// checks the span; see spanned). Unreadable rows
// are counted, not reported to Options.OnCorrupt (a read of the session
// reports each).
func (st *Store) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	if err := st.check(ctx); err != nil {
		return nil, err
	}
	out := make([]adapters.SessionSummary, len(ids))
	at := make(map[string]int, len(ids))
	uniq := make([]string, 0, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if _, dup := at[id]; !dup {
			at[id] = i
			uniq = append(uniq, id)
		}
	}
	for lo := 0; lo < len(uniq); lo += maxPageIDs {
		if err := st.summarize(ctx, uniq[lo:min(len(uniq), lo+maxPageIDs)], out, at, each); err != nil {
			return nil, st.wrap(ctx, "summarize sessions", err)
		}
	}
	for i, id := range ids {
		if j := at[id]; j != i {
			out[i] = out[j]
		}
	}
	return out, nil
}

// pageStmts are the statements of summarize for maxPageIDs ids, prepared
// once: parsing an IN list of 500 parameters costs as much as running it.
type pageStmts struct {
	mu                 sync.Mutex
	rows, times, ckpts *sql.Stmt
	// span counts the sessions between two ids; spanRows reads their
	// rows (see summarize).
	span, spanRows *sql.Stmt
}

func (p *pageStmts) all() []*sql.Stmt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return []*sql.Stmt{p.rows, p.times, p.ckpts, p.span, p.spanRows}
}

// summaryQueries returns summarize's statements for n ids: of the rows,
// of the times, of the checkpoints.
func (st *Store) summaryQueries(n int) (rows, times, ckpts string) {
	in := "(?" + strings.Repeat(", ?", n-1) + ")"
	return `SELECT session_id, message_data FROM ` + quote(st.q.messages) + ` WHERE session_id IN ` + in + ` ORDER BY session_id, id`,
		`SELECT session_id, updated_at FROM ` + quote(st.q.sessions) + ` WHERE session_id IN ` + in,
		`SELECT session_id, name, version, document FROM ` + quote(st.q.ck.table) + ` WHERE session_id IN ` + in + ` ORDER BY session_id, name`
}

// spanQueries returns summarize's statements on a span of ids: how many
// sessions hold rows from ?1 to ?2 (counting at most ?3), and their rows.
func (st *Store) spanQueries() (count, rows string) {
	m := quote(st.q.messages)
	// BINARY, the order ids are sorted in, whatever the column's
	// collation (the schema's, Python's, is BINARY too).
	where := ` FROM ` + m + ` WHERE session_id >= ?1 COLLATE BINARY AND session_id <= ?2 COLLATE BINARY`
	return `SELECT count(*) FROM (SELECT DISTINCT session_id` + where + ` LIMIT ?3)`,
		`SELECT session_id, message_data` + where + ` ORDER BY session_id, id`
}

// pageQuery runs one of summarize's statements: prepared once when
// prepare, as text otherwise.
func (st *Store) pageQuery(ctx context.Context, stmt **sql.Stmt, text string, prepare bool, args []any) (*sql.Rows, error) {
	if !prepare {
		return st.db.QueryContext(ctx, text, args...)
	}
	p := &st.pageStmts
	p.mu.Lock()
	if *stmt == nil {
		s, err := st.db.PrepareContext(ctx, text)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		*stmt = s
	}
	s := *stmt
	p.mu.Unlock()
	return s.QueryContext(ctx, args...)
}

// summarize fills the summaries of ids (at most maxPageIDs).
func (st *Store) summarize(ctx context.Context, ids []string, out []adapters.SessionSummary, at map[string]int, each func(string, session.Item)) error {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	qRows, qTimes, qCkpts := st.summaryQueries(len(ids))
	full := len(ids) == maxPageIDs
	p := &st.pageStmts
	spanned, err := st.spanned(ctx, ids)
	if err != nil {
		return err
	}
	var rows *sql.Rows
	if spanned {
		_, qSpan := st.spanQueries()
		rows, err = st.pageQuery(ctx, &p.spanRows, qSpan, true, []any{ids[0], ids[len(ids)-1]})
	} else {
		rows, err = st.pageQuery(ctx, &p.rows, qRows, full, args)
	}
	if err != nil {
		return err
	}
	var (
		d   decoder
		sid string
	)
	for rows.Next() {
		if err := rows.Scan(&sid, &d.raw); err != nil {
			rows.Close()
			return err
		}
		i, ok := at[sid]
		if !ok {
			continue
		}
		it, err := d.dec.DecodeString(d.text())
		if err != nil {
			out[i].Unreadable++
			continue
		}
		out[i].Items++
		out[i].Bytes += int64(len(it.Bytes()))
		if each != nil {
			each(sid, it)
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}

	rows, err = st.pageQuery(ctx, &p.times, qTimes, full, args)
	if err != nil {
		return err
	}
	for rows.Next() {
		var updated sql.NullTime
		if err := rows.Scan(&sid, &updated); err != nil {
			rows.Close()
			return err
		}
		if i, ok := at[sid]; ok {
			out[i].Updated = updated.Time
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}

	if ok, err := st.checkpointsReady(ctx); err != nil || !ok {
		return err
	}
	rows, err = st.pageQuery(ctx, &p.ckpts, qCkpts, full, args)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c adapters.StoredCheckpoint
		if err := rows.Scan(&sid, &c.Name, &c.Version, &c.Document); err != nil {
			rows.Close()
			return err
		}
		if c.Document == nil {
			c.Document = []byte{}
		}
		if i, ok := at[sid]; ok {
			out[i].Checkpoints = append(out[i].Checkpoints, c)
		}
	}
	return closeRows(rows)
}

// spanned reports whether summarize reads the rows of ids (sorted, none
// repeated) as one span of the (session_id, id) index, from the first id
// to the last, rather than looking each id up: when the span holds fewer
// than twice as many sessions as ids, as a page ListSessionsPage listed
// does. A span is one range scan instead of a probe per id; the rows of
// the sessions in it that are not among ids are skipped, so the statement
// counting the span's sessions (a scan of the index alone, stopped after
// 2*len(ids)) bounds what reading the span can cost more than the probes.
func (st *Store) spanned(ctx context.Context, ids []string) (bool, error) {
	if len(ids) < 2 || !sort.StringsAreSorted(ids) {
		return false, nil
	}
	q, _ := st.spanQueries()
	rows, err := st.pageQuery(ctx, &st.pageStmts.span, q, true, []any{ids[0], ids[len(ids)-1], 2 * len(ids)})
	if err != nil {
		return false, err
	}
	var n int
	for rows.Next() {
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return false, err
		}
	}
	if err := closeRows(rows); err != nil {
		return false, err
	}
	return n < 2*len(ids), nil
}

// ListSessionsPage lists a page of the sessions holding items or
// checkpoints, sorted (adapters.PageLister): the cursor is the last id
// listed.
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	return s.st.ListSessionsPage(ctx, cursor, limit)
}

// SummarizeSessions summarizes a page of sessions (adapters.Summarizer)
// with three statements per 500 ids.
func (s *urlStore) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	return s.st.SummarizeSessions(ctx, ids, each)
}
