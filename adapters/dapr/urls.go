package dapr

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/agentsessions/sessions/adapters"
)

// Scheme is the URL scheme of Dapr stores:
//
//	dapr://HOST:PORT/STORE?consistency=strong&ttl=24h&max_attempts=5
//
// HOST:PORT is the sidecar's gRPC API, STORE the state store component's
// name; the options are Options.Consistency, Options.TTL (whole seconds)
// and Options.MaxAttempts. Importing this package registers it with
// package adapters.
const Scheme = "dapr"

func init() {
	adapters.Register(Scheme, URLOpener{})
}

// URLOpener opens dapr:// URLs with Open.
type URLOpener struct{}

// OpenStoreURL opens the Store u names.
func (URLOpener) OpenStoreURL(ctx context.Context, u *url.URL, o adapters.Options) (adapters.Store, error) {
	q, err := adapters.ParseQuery(u, "consistency", "ttl", "max_attempts")
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: a dapr URL holds no user or password (the sidecar's API token is the client's, see New)", adapters.ErrInvalidDSN)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: a dapr URL names the sidecar's gRPC address: dapr://HOST:PORT/STORE", adapters.ErrInvalidDSN)
	}
	store := strings.TrimPrefix(u.Path, "/")
	if store == "" || strings.Contains(store, "/") {
		return nil, fmt.Errorf("%w: a dapr URL's path is the state store's name: dapr://HOST:PORT/STORE", adapters.ErrInvalidDSN)
	}
	opts := Options{StoreName: store, OnCorrupt: o.OnCorrupt}
	c, err := q.OneOf("consistency", string(ConsistencyEventual), string(ConsistencyStrong))
	if err != nil {
		return nil, err
	}
	opts.Consistency = Consistency(c)
	if opts.TTL, err = q.Duration("ttl"); err != nil {
		return nil, err
	}
	if opts.MaxAttempts, err = q.Int("max_attempts"); err != nil {
		return nil, err
	}
	st, err := Open(ctx, u.Host, opts)
	if errors.Is(err, ErrInvalidOptions) {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	if err != nil {
		return nil, err
	}
	base, err := adapters.NewStore(st.Session, st.Close)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &urlStore{Store: base, st: st}, nil
}

// urlStore is a Store opened from a URL.
type urlStore struct {
	adapters.Store
	st *Store
}

// AppendRaw stores raw as the next record of session id, unvalidated.
func (s *urlStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	return s.st.AppendRaw(ctx, id, raw)
}
