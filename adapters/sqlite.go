package adapters

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/session"
)

func init() {
	register("sqlite", opener{
		options: []string{"sessions_table", "messages_table", "busy_timeout"},
		open:    openSQLite,
	})
}

// SQLitePath returns the file path of an sqlite: URL: sqlite:///abs/x.db is
// /abs/x.db, sqlite://rel/x.db and sqlite:rel/x.db are rel/x.db, and
// sqlite::memory: is a private in-memory database.
func SQLitePath(u *url.URL) (string, error) {
	var p string
	switch {
	case u.Opaque != "":
		p = u.Opaque
	case u.Host != "":
		p = u.Host + u.Path
	default:
		p = u.Path
	}
	if p == "" {
		return "", fmt.Errorf("%w: sqlite URL without a path (want sqlite:///path/to/file.db)", ErrInvalidDSN)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: NUL in sqlite path", ErrInvalidDSN)
	}
	return p, nil
}

// openSQLite opens sqlite: URLs with options sessions_table,
// messages_table and busy_timeout.
func openSQLite(ctx context.Context, u *url.URL, q url.Values, o Options) (Store, error) {
	path, err := SQLitePath(u)
	if err != nil {
		return nil, err
	}
	busy, err := durationOption(q, "busy_timeout")
	if err != nil {
		return nil, err
	}
	opts := sqlite.Options{
		SessionsTable: first(q, "sessions_table"),
		MessagesTable: first(q, "messages_table"),
		BusyTimeout:   busy,
		OnCorrupt:     o.OnCorrupt,
	}
	st, err := sqlite.Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	return &sqliteStore{sessionStore[*sqlite.Session]{
		session:  st.Session,
		declared: session.Caps(session.CapLatest, session.CapReplace),
		close:    st.Close,
	}, st, opts}, nil
}

type sqliteStore struct {
	sessionStore[*sqlite.Session]
	st   *sqlite.Store
	opts sqlite.Options
}

// AppendRaw inserts raw as the next message row of session id, unvalidated.
func (s *sqliteStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	sessions, messages := s.opts.SessionsTable, s.opts.MessagesTable
	if sessions == "" {
		sessions = "agent_sessions"
	}
	if messages == "" {
		messages = "agent_messages"
	}
	if _, err := s.st.DB().ExecContext(ctx, `INSERT OR IGNORE INTO "`+sessions+`" (session_id) VALUES (?)`, id); err != nil {
		return err
	}
	_, err := s.st.DB().ExecContext(ctx, `INSERT INTO "`+messages+`" (session_id, message_data) VALUES (?, ?)`, id, string(raw))
	return err
}

// ListSessions lists the sessions that hold items, sorted.
func (s *sqliteStore) ListSessions(ctx context.Context) ([]string, error) {
	messages := s.opts.MessagesTable
	if messages == "" {
		messages = "agent_messages"
	}
	rows, err := s.st.DB().QueryContext(ctx, `SELECT DISTINCT session_id FROM "`+messages+`" ORDER BY session_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
