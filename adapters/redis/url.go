package redis

import (
	"context"
	"fmt"
	"net/url"
	"strings"

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
	client, err := clientFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	st, err := New(client, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	st.owned = true
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: open %s: %w", redactURL(rawURL), err)
	}
	if err := st.LoadScripts(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: open %s: %w", redactURL(rawURL), err)
	}
	return st, nil
}

// clientFromURL builds the client for one of Open's URL forms.
func clientFromURL(rawURL string) (goredis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a URL (want redis://, rediss://, unix://, redis+cluster:// or redis+sentinel://)", ErrInvalidOptions, redactURL(rawURL))
	}
	base, mode, _ := strings.Cut(strings.ToLower(scheme), "+")
	switch {
	case mode == "" && (base == "redis" || base == "rediss" || base == "unix"):
		o, err := goredis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		return goredis.NewClient(o), nil
	case (mode == "cluster" || mode == "sentinel") && (base == "redis" || base == "rediss"):
		u, err := seedURL(base, rest)
		if err != nil {
			return nil, err
		}
		if mode == "cluster" {
			o, err := goredis.ParseClusterURL(u)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
			}
			return goredis.NewClusterClient(o), nil
		}
		o, err := goredis.ParseFailoverURL(u)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		if o.MasterName == "" {
			return nil, fmt.Errorf("%w: a sentinel URL needs master_name=NAME", ErrInvalidOptions)
		}
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
		return "", fmt.Errorf("%w: %w", ErrInvalidOptions, err)
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
