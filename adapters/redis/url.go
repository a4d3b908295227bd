package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Open connects to the Redis deployment at rawURL, checks that it answers
// (PING), caches the Lua scripts on it (LoadScripts), and returns a Store whose Close closes the client. URL forms:
//
//	redis://[user:pass@]host:port[/db][?options]     one server (go-redis ParseURL)
//	rediss://...                                      the same over TLS
//	unix://[user:pass@]/path/to/socket[?db=N]         one server on a Unix socket
//	redis+cluster://[user:pass@]h1:p1,h2:p2[?options] a Redis Cluster (go-redis ParseClusterURL)
//	rediss+cluster://...                              the same over TLS
//	redis+sentinel://[user:pass@]s1:p1,s2:p2[/db]?master_name=NAME[&options]
//	rediss+sentinel://...                             a sentinel-managed primary (go-redis ParseFailoverURL)
//
// In the cluster and sentinel forms the seed addresses may be listed
// comma-separated in the host part, or as go-redis's own repeated
// addr=host:port query parameters; both may be mixed. The options are
// go-redis's query parameters (dial_timeout, read_timeout, max_retries,
// pool_size, ...): unknown parameters are an error.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	routeGoRedisLog()
	client, err := clientFromURL(rawURL, opts.TLSConfig)
	if err != nil {
		return nil, err
	}
	st, err := New(client, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	st.owned = true
	if err := plainServerAtTLSURL(ctx, rawURL, client); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: open %s: %w", redactURL(rawURL), err)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: open %s: %w%s", redactURL(rawURL), err, tlsHint(rawURL, err))
	}
	if err := st.LoadScripts(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: open %s: %w", redactURL(rawURL), err)
	}
	return st, nil
}

// errPlainServer reports a rediss:// URL naming a server that answers
// plain RESP, where a TLS handshake would wait for a reply that never comes
// (go-redis retries it for tens of seconds).
var errPlainServer = errors.New("the server answers plain Redis, not TLS: use redis:// for it")

// plainServerAtTLSURL checks, for a rediss:// URL, that the first server
// does not answer a plain PING: one extra connection at Open, so that a
// wrong scheme fails at once with what to do instead of timing out.
func plainServerAtTLSURL(ctx context.Context, rawURL string, client goredis.UniversalClient) error {
	if !strings.HasPrefix(strings.ToLower(rawURL), "rediss") {
		return nil
	}
	var addr string
	switch c := client.(type) {
	case *goredis.Client:
		addr = c.Options().Addr
	case *goredis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			addr = a[0]
		}
	}
	if addr == "" {
		return nil
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil // Ping reports the dial failure as it is
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return nil
	}
	var b [1]byte
	if n, _ := conn.Read(b[:]); n == 1 && (b[0] == '+' || b[0] == '-') {
		return errPlainServer
	}
	return nil
}

// tlsHint says what a TLS failure usually means, for Open's error.
func tlsHint(rawURL string, err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var rec tls.RecordHeaderError
	switch {
	case errors.As(err, &rec):
		return " (the server does not speak TLS: use redis:// for a plain server)"
	case errors.As(err, &unknownCA):
		return " (the server's certificate is not signed by a trusted CA: give its CA with tls_ca_file=PATH, or skip_verify=true to not verify at all)"
	case errors.As(err, &hostname):
		return " (the server's certificate does not name the host in the URL)"
	case strings.HasPrefix(strings.ToLower(rawURL), "redis") && !strings.HasPrefix(strings.ToLower(rawURL), "rediss") && errors.Is(err, context.DeadlineExceeded):
		return " (no answer: if the server only speaks TLS, use rediss://)"
	}
	return ""
}

// withTLS applies conf to a parsed URL's TLS settings (nil when the URL is
// not rediss://), keeping what the URL set.
func withTLS(fromURL, conf *tls.Config) *tls.Config {
	if fromURL == nil || conf == nil {
		return fromURL
	}
	c := conf.Clone()
	if c.ServerName == "" {
		c.ServerName = fromURL.ServerName
	}
	c.InsecureSkipVerify = c.InsecureSkipVerify || fromURL.InsecureSkipVerify
	if c.MinVersion == 0 {
		c.MinVersion = fromURL.MinVersion
	}
	return c
}

// clientFromURL builds the client for one of Open's URL forms.
func clientFromURL(rawURL string, conf *tls.Config) (goredis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a URL (want redis://, rediss://, unix://, redis+cluster:// or redis+sentinel://)", ErrInvalidOptions, redactURL(rawURL))
	}
	base, mode, _ := strings.Cut(strings.ToLower(scheme), "+")
	switch {
	case mode == "" && (base == "redis" || base == "rediss" || base == "unix"):
		o, err := goredis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, goRedisError{err})
		}
		o.TLSConfig = withTLS(o.TLSConfig, conf)
		return goredis.NewClient(o), nil
	case (mode == "cluster" || mode == "sentinel") && (base == "redis" || base == "rediss"):
		u, err := seedURL(base, rest)
		if err != nil {
			return nil, err
		}
		if mode == "cluster" {
			o, err := goredis.ParseClusterURL(u)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, goRedisError{err})
			}
			o.TLSConfig = withTLS(o.TLSConfig, conf)
			return goredis.NewClusterClient(o), nil
		}
		o, err := goredis.ParseFailoverURL(u)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, goRedisError{err})
		}
		if o.MasterName == "" {
			return nil, fmt.Errorf("%w: a sentinel URL needs master_name=NAME", ErrInvalidOptions)
		}
		o.TLSConfig = withTLS(o.TLSConfig, conf)
		return goredis.NewFailoverClient(o), nil
	default:
		return nil, fmt.Errorf("%w: unsupported URL scheme %q", ErrInvalidOptions, scheme)
	}
}

// seedURL rewrites "h1:p1,h2:p2..." in the host part of a cluster or
// sentinel URL (rest is what follows "scheme://") into go-redis's form:
// the first host stays the URL's host, the others become addr=
// parameters.
func seedURL(scheme, rest string) (string, error) {
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo := ""
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	hosts := strings.Split(authority, ",")
	for _, h := range hosts {
		if h == "" {
			return "", fmt.Errorf("%w: empty address in %q", ErrInvalidOptions, authority)
		}
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidOptions, goRedisError{err})
	}
	if len(hosts) > 1 {
		q := u.Query()
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// redactURL hides the password of a URL for error messages.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "<invalid URL>"
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(authority[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
