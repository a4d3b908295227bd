package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters"
)

// Scheme is the URL scheme of SQLite stores (see package adapters).
const Scheme = "sqlite"

func init() {
	adapters.Register(Scheme, URLOpener{})
}

// URLOpener opens sqlite: URLs:
//
//	sqlite:///abs/path/sessions.db   the file /abs/path/sessions.db
//	sqlite:rel/path.db               the file rel/path.db
//	sqlite::memory:                  a private in-memory database
//
// sqlite://rel/path.db is refused: a URL's host is not a directory, and
// whether "rel" was meant as /rel or as ./rel is the user's to say.
//
// Options: sessions_table (Options.SessionsTable, default agent_sessions),
// messages_table (Options.MessagesTable, default agent_messages),
// busy_timeout (Options.BusyTimeout, default 5s), synchronous=full|normal
// (Options.Synchronous, default full; see the package documentation for
// what a crash keeps with each) and checkpoints_table
// (Options.CheckpointsTable, default agent_checkpoints). With
// adapters.Options.ReadOnly the file is opened read-only (Options.ReadOnly).
type URLOpener struct{}

// OpenStoreURL opens the database u names.
func (URLOpener) OpenStoreURL(ctx context.Context, u *url.URL, o adapters.Options) (adapters.Store, error) {
	path, err := URLPath(u)
	if err != nil {
		return nil, err
	}
	q, err := adapters.ParseQuery(u, "sessions_table", "messages_table", "busy_timeout", "synchronous", "checkpoints_table")
	if err != nil {
		return nil, err
	}
	opts := Options{
		SessionsTable:    q.Get("sessions_table"),
		MessagesTable:    q.Get("messages_table"),
		CheckpointsTable: q.Get("checkpoints_table"),
		OnCorrupt:        o.OnCorrupt,
		ReadOnly:         o.ReadOnly,
	}
	if opts.BusyTimeout, err = q.Duration("busy_timeout"); err != nil {
		return nil, err
	}
	sync, err := q.OneOf("synchronous", string(SyncFull), string(SyncNormal))
	if err != nil {
		return nil, err
	}
	opts.Synchronous = Synchronous(sync)
	if _, err := opts.withDefaults(); err != nil {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	st, err := OpenFile(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	base, err := adapters.NewStore(st.Session, st.Close)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &urlStore{Store: base, st: st}, nil
}

// URLPath returns the file path of an sqlite: URL: sqlite:///abs/x.db is
// /abs/x.db, sqlite:rel/x.db is rel/x.db, and sqlite::memory: is
// ":memory:". A URL with a host (sqlite://rel/x.db) is an error that says
// both readings.
func URLPath(u *url.URL) (string, error) {
	var p string
	switch {
	case u.Opaque != "":
		p = u.Opaque
	case u.Host != "":
		return "", fmt.Errorf("%w: sqlite://%s%s names a host, not a file: write sqlite:///%s%s for the absolute path /%s%s, or sqlite:%s%s for the relative one",
			adapters.ErrInvalidDSN, u.Host, u.Path, u.Host, u.Path, u.Host, u.Path, u.Host, u.Path)
	default:
		p = u.Path
	}
	if p == "" {
		return "", fmt.Errorf("%w: sqlite URL without a path (want sqlite:///path/to/file.db)", adapters.ErrInvalidDSN)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: NUL in sqlite path", adapters.ErrInvalidDSN)
	}
	return p, nil
}

// urlStore is a Store opened from a URL.
type urlStore struct {
	adapters.Store
	st *Store
}

// ListSessions lists the sessions that hold items or checkpoints, sorted.
func (s *urlStore) ListSessions(ctx context.Context) ([]string, error) {
	if err := s.st.check(ctx); err != nil {
		return nil, err
	}
	q, err := s.st.listQuery(ctx, "", "")
	if err != nil {
		return nil, s.st.wrap(ctx, "list sessions", err)
	}
	rows, err := s.st.db.QueryContext(ctx, q)
	if err != nil {
		return nil, s.st.wrap(ctx, "list sessions", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.st.wrap(ctx, "list sessions", err)
		}
		ids = append(ids, id)
	}
	return ids, s.st.wrap(ctx, "list sessions", rows.Err())
}

// RemoveSession deletes everything the store holds for session id: its
// items, its session row and its checkpoints (Store.RemoveSession).
func (s *urlStore) RemoveSession(ctx context.Context, id string) error {
	return s.st.RemoveSession(ctx, id)
}

// AppendRaw stores raw, unvalidated, as TEXT in the next row of session
// id, with the statements AddItems uses.
func (s *urlStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	if _, err := s.st.Session(id); err != nil {
		return err
	}
	return s.st.appendRaw(ctx, id, raw)
}

// appendRaw stores raw, unvalidated, as TEXT in the next row of session
// id, with the statements AddItems uses (and, on an AdvancedSQLiteSession
// store, its structure row on the handle's branch, MainBranch).
func (st *Store) appendRaw(ctx context.Context, id string, raw []byte) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	return st.writeW(ctx, "append raw", false, func(ctx context.Context, w *wconn, _ bool) error {
		c := w.c
		if _, err := c.ExecContext(ctx, st.q.upsertSession, id); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, st.q.insertSQL(1), id, string(raw)); err != nil {
			return err
		}
		if !w.advanced {
			return nil
		}
		return s.insertStructure(ctx, w, 1, func(int) []byte { return raw })
	})
}

// sqliteTime is how CURRENT_TIMESTAMP writes a time: UTC, to the second.
const sqliteTime = "2006-01-02 15:04:05"

// SessionTimes returns the session row's created_at and updated_at.
func (s *urlStore) SessionTimes(ctx context.Context, id string) (adapters.SessionTimes, bool, error) {
	var t adapters.SessionTimes
	if err := s.st.check(ctx); err != nil {
		return t, false, err
	}
	var created, updated sql.NullTime
	err := s.st.db.QueryRowContext(ctx, `SELECT created_at, updated_at FROM `+quote(s.st.q.sessions)+` WHERE session_id = ?`, id).Scan(&created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, s.st.wrap(ctx, "session times", err)
	}
	t.Created, t.Updated = created.Time, updated.Time
	return t, true, nil
}

// SetSessionTimes sets the session row's non-zero times.
func (s *urlStore) SetSessionTimes(ctx context.Context, id string, t adapters.SessionTimes) error {
	return s.st.write(ctx, "set session times", func(ctx context.Context, c *sql.Conn) error {
		for col, v := range map[string]time.Time{"created_at": t.Created, "updated_at": t.Updated} {
			if v.IsZero() {
				continue
			}
			if _, err := c.ExecContext(ctx, `UPDATE `+quote(s.st.q.sessions)+` SET `+col+` = ? WHERE session_id = ?`, v.UTC().Format(sqliteTime), id); err != nil {
				return err
			}
		}
		return nil
	})
}
