package memory

import (
	"context"
	"net/url"

	"github.com/agentsessions/sessions/adapters"
)

// Scheme is the URL scheme of memory stores: memory://, with options ttl
// and refresh_on_read (see package adapters).
const Scheme = "memory"

func init() {
	adapters.Register(Scheme, URLOpener{})
}

// URLOpener opens memory:// URLs: every Open makes a new, empty Store.
// Options: ttl=<duration> (Options.TTL, default 0: never expire) and
// refresh_on_read=<bool> (Options.RefreshOnRead, default false).
type URLOpener struct{}

// OpenStoreURL opens a new Store with the URL's options.
func (URLOpener) OpenStoreURL(_ context.Context, u *url.URL, o adapters.Options) (adapters.Store, error) {
	q, err := adapters.ParseQuery(u, "ttl", "refresh_on_read")
	if err != nil {
		return nil, err
	}
	opts := Options{OnCorrupt: o.OnCorrupt}
	if opts.TTL, err = q.Duration("ttl"); err != nil {
		return nil, err
	}
	if opts.RefreshOnRead, err = q.Bool("refresh_on_read"); err != nil {
		return nil, err
	}
	st := New(opts)
	base, err := adapters.NewStore(st.Session, st.Close)
	if err != nil {
		return nil, err
	}
	return &urlStore{Store: base, st: st}, nil
}

// urlStore is a Store opened from a URL.
type urlStore struct {
	adapters.Store
	st *Store
}

// ListSessions lists the sessions holding items or checkpoints, sorted.
func (s *urlStore) ListSessions(ctx context.Context) ([]string, error) {
	return s.st.ListSessions(ctx)
}

// RemoveSession removes everything the store holds for session id, its
// operation ids included.
func (s *urlStore) RemoveSession(ctx context.Context, id string) error {
	return s.st.RemoveSession(ctx, id)
}

// AppendRaw stores raw as the next record of session id, unvalidated.
func (s *urlStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := s.st.Session(id)
	if err != nil {
		return err
	}
	h.appendRaw(raw)
	return nil
}
