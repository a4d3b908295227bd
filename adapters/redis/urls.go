package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters"
)

// schemes are the URL schemes of Redis stores (see Open for their forms).
var schemes = []string{"redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"}

// urlOptions are the query options the adapter takes; every other option
// is go-redis's own (dial_timeout, pool_size, …), validated by go-redis.
var urlOptions = []string{"key_prefix", "layout", "ttl", "refresh_on_read", "max_batch_bytes", "tls_ca_file", "wait_replicas", "wait_timeout", "held_conns"}

func init() {
	for _, s := range schemes {
		adapters.Register(s, URLOpener{})
	}
}

// URLOpener opens the Redis URLs Open accepts. Options: key_prefix
// (Options.KeyPrefix, default "agents:session"), layout (native or python,
// default native), ttl (Options.TTL, default 0: never expire),
// refresh_on_read (default false), max_batch_bytes (Options.MaxBatchBytes,
// default 64 MiB, negative for no limit), wait_replicas and wait_timeout
// (Options.WaitReplicas and Options.WaitTimeout: e.g.
// ?wait_replicas=1&wait_timeout=500ms acknowledges a write only once one
// replica has it), held_conns (Options.HeldConns: default 4, negative for
// none) and, for rediss://, tls_ca_file
// (a PEM file of the CAs to trust instead of the system's; certificates are
// always verified unless go-redis's own skip_verify=true says not to). Opening creates nothing, so
// adapters.Options.ReadOnly needs nothing more.
type URLOpener struct{}

// OpenStoreURL connects to the deployment u names.
func (URLOpener) OpenStoreURL(ctx context.Context, u *url.URL, o adapters.Options) (adapters.Store, error) {
	q, err := adapters.ParsePassthroughQuery(u, urlOptions...)
	if err != nil {
		return nil, err
	}
	opts := Options{KeyPrefix: q.Get("key_prefix"), OnCorrupt: o.OnCorrupt}
	switch l, err := q.OneOf("layout", "native", "python"); {
	case err != nil:
		return nil, err
	case l == "python":
		opts.Layout = LayoutPython
	}
	if opts.TTL, err = q.Duration("ttl"); err != nil {
		return nil, err
	}
	if opts.RefreshOnRead, err = q.Bool("refresh_on_read"); err != nil {
		return nil, err
	}
	if v := q.Get("max_batch_bytes"); v != "" {
		if opts.MaxBatchBytes, err = strconv.Atoi(v); err != nil {
			return nil, adapters.BadOption("max_batch_bytes", v, "an integer")
		}
	}
	if v := q.Get("wait_replicas"); v != "" {
		if opts.WaitReplicas, err = strconv.Atoi(v); err != nil || opts.WaitReplicas < 0 {
			return nil, adapters.BadOption("wait_replicas", v, "a number of replicas, 0 or more")
		}
	}
	if opts.WaitTimeout, err = q.Duration("wait_timeout"); err != nil {
		return nil, err
	}
	if v := q.Get("held_conns"); v != "" {
		if opts.HeldConns, err = strconv.Atoi(v); err != nil {
			return nil, adapters.BadOption("held_conns", v, "an integer")
		}
	}
	if path := q.Get("tls_ca_file"); path != "" {
		if opts.TLSConfig, err = caConfig(path); err != nil {
			return nil, err
		}
	}
	if _, err := opts.normalize(); err != nil {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	st, err := Open(ctx, q.DriverURL(u), opts)
	if errors.Is(err, ErrInvalidOptions) {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	if err != nil {
		return nil, err
	}
	base, err := adapters.NewStore(st.Handle, st.Close)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return &urlStore{Store: base, st: st}, nil
}

// caConfig returns a TLS configuration trusting the PEM certificates of
// the file at path (and only those).
func caConfig(path string) (*tls.Config, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: tls_ca_file: %w", adapters.ErrInvalidDSN, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: tls_ca_file %s holds no PEM certificate", adapters.ErrInvalidDSN, path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// urlStore is a Store opened from a URL.
type urlStore struct {
	adapters.Store
	st *Store
}

var _ adapters.Timestamps = (*urlStore)(nil)

// ListSessions scans every primary for the layout's item lists and
// checkpoint hashes, as ListSessionsPage does, and returns the session
// ids, sorted: the sessions holding items or a checkpoint. One whose only
// key is its metadata, or a hash of AddItemsOnce's operation ids (what
// Clear leaves of a session that saved no checkpoint), is not listed.
func (s *urlStore) ListSessions(ctx context.Context) ([]string, error) {
	return s.st.listSessions(ctx)
}

// RemoveSession deletes every key of session id, its checkpoint hash and
// pop records included (Store.RemoveSession): what Clear leaves goes too.
func (s *urlStore) RemoveSession(ctx context.Context, id string) error {
	return s.st.RemoveSession(ctx, id)
}

// AppendRaw pushes raw onto session id's item list, unvalidated.
func (s *urlStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	h, err := s.st.Session(id)
	if err != nil {
		return err
	}
	return sent(sendOnce(ctx, s.st.client, "rpush", h.keys[0], raw).Err())
}

// listSessions reads the whole paged listing (list.go).
func (st *Store) listSessions(ctx context.Context) ([]string, error) {
	return st.listAllSessions(ctx)
}

// itemsKeyID returns the session whose item list key is, in the Store's
// layout: the id whose first key (Session.Keys) is key.
func (st *Store) itemsKeyID(key string) (string, bool) {
	var id string
	if st.opts.Layout == LayoutPython {
		rest, ok := strings.CutPrefix(key, st.opts.KeyPrefix+":")
		if !ok {
			return "", false
		}
		if id, ok = strings.CutSuffix(rest, pythonMessagesSuffix); !ok {
			return "", false
		}
	} else {
		var kind KeyKind
		var ok bool
		if id, kind, ok = ParseKey(st.opts.KeyPrefix, key); !ok || kind != KeyItems {
			return "", false
		}
	}
	h, err := st.Session(id)
	if err != nil || h.keys[0] != key {
		return "", false
	}
	return id, true
}

// globEscape escapes the characters SCAN's MATCH gives a meaning to.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// SessionTimes returns the metadata hash's created_at and updated_at.
// Native times are Unix milliseconds, Python's Unix seconds. The Python
// layout stamps updated_at on every append (as the Python SDK does); the
// native one does not (an append is a bare RPUSHX), so there updated_at is
// the time SetSessionTimes set (a migration's or repair's source time), and
// is reported only while the history is still the one it was set for: once
// the history changed, Updated is zero (unknown).
func (s *urlStore) SessionTimes(ctx context.Context, id string) (adapters.SessionTimes, bool, error) {
	var t adapters.SessionTimes
	h, err := s.st.Session(id)
	if err != nil {
		return t, false, err
	}
	var vals []any
	if s.st.opts.Layout == LayoutPython {
		vals, err = s.st.client.HMGet(ctx, h.keys[1], "created_at", "updated_at").Result()
	} else {
		vals, err = s.st.run(ctx, sessionTimesScript, h.keys[:2]).Slice()
	}
	if err != nil {
		return t, false, fmt.Errorf("redis: session times: %w", err)
	}
	if len(vals) != 2 || vals[0] == nil && vals[1] == nil {
		return t, false, nil
	}
	t.Created, t.Updated = s.st.parseStamp(vals[0]), s.st.parseStamp(vals[1])
	return t, true, nil
}

// SetSessionTimes sets the metadata hash's non-zero times, on a session
// that exists (its items list does). In the native layout one script
// checks that and sets them, updated_at with the version of the history
// it describes (see SessionTimes).
func (s *urlStore) SetSessionTimes(ctx context.Context, id string, t adapters.SessionTimes) error {
	h, err := s.st.Session(id)
	if err != nil {
		return err
	}
	if t.Created.IsZero() && t.Updated.IsZero() {
		return nil
	}
	if s.st.opts.Layout == LayoutNative {
		var created, updated string
		if !t.Created.IsZero() {
			created = s.st.formatStamp(t.Created)
		}
		if !t.Updated.IsZero() {
			updated = s.st.formatStamp(t.Updated)
		}
		n, err := s.st.run(ctx, setTimesScript, h.keys[:2], created, updated).Int64()
		err = sent(err)
		if err == nil && n == 0 {
			err = errors.New("no such session")
		}
		if err != nil {
			return fmt.Errorf("redis: set session times: %w", err)
		}
		return nil
	}
	var fields []any
	if !t.Created.IsZero() {
		fields = append(fields, "created_at", s.st.formatStamp(t.Created))
	}
	if !t.Updated.IsZero() {
		fields = append(fields, "updated_at", s.st.formatStamp(t.Updated))
	}
	if n, err := s.st.client.Exists(ctx, h.keys[0]).Result(); err != nil || n == 0 {
		if err == nil {
			err = errors.New("no such session")
		}
		return fmt.Errorf("redis: set session times: %w", err)
	}
	if err := s.st.client.HSet(ctx, h.keys[1], fields...).Err(); err != nil {
		return fmt.Errorf("redis: set session times: %w", sent(err))
	}
	return nil
}

// formatStamp writes t as the layout stamps times.
func (st *Store) formatStamp(t time.Time) string {
	if st.opts.Layout == LayoutPython {
		return strconv.FormatInt(t.Unix(), 10)
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// parseStamp reads a stamp of the layout, the zero time when absent or not
// a number (Python writes floats too).
func (st *Store) parseStamp(v any) time.Time {
	s, ok := v.(string)
	if !ok {
		return time.Time{}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}
	}
	if st.opts.Layout == LayoutPython {
		return time.Unix(0, int64(f*1e9))
	}
	return time.UnixMilli(int64(f))
}
