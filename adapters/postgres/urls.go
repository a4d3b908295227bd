package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentsessions/sessions/adapters"
)

// Schemes are the URL schemes of PostgreSQL stores (see package adapters).
var Schemes = []string{"postgres", "postgresql"}

// urlOptions are the query options the adapter takes; every other option
// is pgx's or pgxpool's own (sslmode, connect_timeout, pool_max_conns,
// application_name, …), validated by pgx or, for a server setting, by the
// server when pgx connects.
var urlOptions = []string{"schema", "sessions_table", "messages_table", "checkpoints_table"}

func init() {
	for _, s := range Schemes {
		adapters.Register(s, URLOpener{})
	}
}

// URLOpener opens postgres:// and postgresql:// URLs, in pgx's forms:
//
//	postgres://[user[:password]@]host[:port][,host2[:port2]…]/database[?option=value&…]
//
// Options: schema (Options.Schema, default none: the search_path),
// sessions_table (Options.SessionsTable, default agent_sessions),
// messages_table (Options.MessagesTable, default agent_messages) and
// checkpoints_table (Options.CheckpointsTable, default agent_checkpoints);
// the rest go to pgx. With adapters.Options.ReadOnly nothing is created
// (Options.SkipCreateTables): the tables must exist.
type URLOpener struct{}

// OpenStoreURL connects to the database u names.
func (URLOpener) OpenStoreURL(ctx context.Context, u *url.URL, o adapters.Options) (adapters.Store, error) {
	q, err := adapters.ParsePassthroughQuery(u, urlOptions...)
	if err != nil {
		return nil, err
	}
	opts := Options{
		Schema:           q.Get("schema"),
		SessionsTable:    q.Get("sessions_table"),
		MessagesTable:    q.Get("messages_table"),
		CheckpointsTable: q.Get("checkpoints_table"),
		OnCorrupt:        o.OnCorrupt,
		SkipCreateTables: o.ReadOnly,
	}
	if _, err := opts.withDefaults(); err != nil {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	dsn := q.DriverURL(u)
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		// pgx masks the password in its parse errors.
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	st, err := Open(ctx, dsn, opts)
	if errors.Is(err, ErrInvalidOptions) {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
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

// urlStore is a Store opened from a URL.
type urlStore struct {
	adapters.Store
	st *Store
}

// ListSessions lists the sessions that hold items or checkpoints.
func (s *urlStore) ListSessions(ctx context.Context) ([]string, error) {
	return s.st.ListSessions(ctx)
}

// RemoveSession deletes everything the store holds for session id: its
// checkpoints, its items and its session row (Store.RemoveSession).
func (s *urlStore) RemoveSession(ctx context.Context, id string) error {
	return s.st.RemoveSession(ctx, id)
}

// AppendRaw stores raw, unvalidated, as the next row of session id.
func (s *urlStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return s.st.AppendRaw(ctx, id, raw)
}

// SessionTimes returns the session row's created_at and updated_at.
func (s *urlStore) SessionTimes(ctx context.Context, id string) (adapters.SessionTimes, bool, error) {
	var t adapters.SessionTimes
	h, err := s.st.Session(id)
	if err != nil {
		return t, false, err
	}
	err = s.st.pool.QueryRow(ctx, `SELECT created_at, updated_at FROM `+s.st.q.sessions+` WHERE session_id = $1`, h.sid).Scan(&t.Created, &t.Updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return adapters.SessionTimes{}, false, nil
	}
	if err != nil {
		return adapters.SessionTimes{}, false, fmt.Errorf("postgres: session times: %w", err)
	}
	return t, true, nil
}

// SetSessionTimes sets the session row's non-zero times.
func (s *urlStore) SetSessionTimes(ctx context.Context, id string, t adapters.SessionTimes) error {
	h, err := s.st.Session(id)
	if err != nil {
		return err
	}
	_, err = s.st.pool.Exec(ctx, `UPDATE `+s.st.q.sessions+` SET
		created_at = COALESCE($2, created_at), updated_at = COALESCE($3, updated_at) WHERE session_id = $1`,
		h.sid, nullTime(t.Created), nullTime(t.Updated))
	if err != nil {
		return fmt.Errorf("postgres: set session times: %w", sent(err))
	}
	return nil
}

// nullTime is nil for the zero time (the column keeps its value), else t
// in UTC without its zone, as TIMESTAMP WITHOUT TIME ZONE holds it.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), u.Hour(), u.Minute(), u.Second(), u.Nanosecond(), time.UTC)
}
