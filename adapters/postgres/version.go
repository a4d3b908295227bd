package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// HistoryVersion returns the version of the session's stored history, in
// one statement: the number of its rows, readable or not, and an MD5
// digest of their ids and xmins in (created_at, id) order. Ids come from a
// sequence and are never reused, and a row updated in place gets a new
// xmin, so a version never comes back after a change.
func (s *Session) HistoryVersion(ctx context.Context) (string, error) {
	if err := s.st.check(ctx); err != nil {
		return "", err
	}
	v, err := scanVersion(s.st.pool.QueryRow(ctx, s.st.q.version, s.sid))
	if err != nil {
		return "", s.st.wrap(ctx, "history version", err)
	}
	return v, nil
}

// scanVersion reads a (count, digest) row as a version.
func scanVersion(row pgx.Row) (string, error) {
	var (
		n      int64
		digest string
	)
	if err := row.Scan(&n, &digest); err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10) + "." + digest, nil
}

// ReplaceItemsIf replaces the history with items, as ReplaceItems does,
// if its version is still version, and otherwise returns an error wrapping
// session.ErrHistoryChanged, having written nothing. One transaction, two
// round trips: BEGIN, the session row's lock (FOR UPDATE, so no append of
// this package or Python's runs beside it), its upsert, and a DELETE of
// the session's rows that returns the version of what it deleted; then,
// if that version is version, the insert and COMMIT, else ROLLBACK. The version checked is
// the one of the rows deleted, so a Python pop (which takes no session
// lock) that took a row meanwhile changes it too.
func (s *Session) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	if err := driver.ValidateBatch(items); err != nil {
		return err
	}
	if err := s.st.check(ctx); err != nil {
		return err
	}
	c, err := s.st.pool.Acquire(ctx)
	if err != nil {
		return s.st.wrap(ctx, "replace items if unchanged", err)
	}
	defer c.Release()
	if err := s.replaceIf(ctx, c, version, items); err != nil {
		rollback(ctx, c)
		return s.st.wrap(ctx, "replace items if unchanged", s.idError(err))
	}
	return nil
}

func (s *Session) replaceIf(ctx context.Context, c *pgxpool.Conn, version string, items []session.Item) error {
	q := s.st.q
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue(q.lockKey, s.sid)
	b.Queue(q.lockSession, s.sid)
	// The upsert creates a missing session row, so that a first append
	// beside this replace (Python's too) waits for it, or it for the
	// append, whose rows the version then counts.
	b.Queue(q.upsertSession, s.sid)
	b.Queue(q.deleteVersion, s.sid)
	br := c.SendBatch(ctx, &b)
	var err error
	for range 4 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	var stored string
	if err == nil {
		stored, err = scanVersion(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if stored != version {
		return fmt.Errorf("%w: the version is %s, not %s", session.ErrHistoryChanged, stored, quoteShort(version))
	}
	b = pgx.Batch{}
	if len(items) == 0 {
		b.Queue(q.clearSession, s.sid)
	} else {
		b.Queue(q.insert, s.sid, texts(items))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.Queue("COMMIT")
	br = c.SendBatch(ctx, &b)
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return sent(err)
}
