package adapters

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/adapters/redis"
	"github.com/agentsessions/sessions/session"
)

// Query parameters the redis schemes take for the adapter; every other
// parameter is go-redis's own (dial_timeout, pool_size, …) and is validated
// by go-redis.
var redisOptions = []string{"key_prefix", "layout", "ttl", "refresh_on_read", "max_batch_bytes"}

func init() {
	for _, scheme := range []string{"redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"} {
		register(scheme, opener{options: redisOptions, passthrough: true, open: openRedis})
	}
}

// openRedis opens the redis schemes with options key_prefix, layout
// (native or python), ttl, refresh_on_read and max_batch_bytes.
func openRedis(ctx context.Context, u *url.URL, q url.Values, o Options) (Store, error) {
	opts := redis.Options{KeyPrefix: first(q, "key_prefix"), OnCorrupt: o.OnCorrupt}
	switch l := first(q, "layout"); l {
	case "", "native":
	case "python":
		opts.Layout = redis.LayoutPython
	default:
		return nil, badOption("layout", l, "native or python")
	}
	var err error
	if opts.TTL, err = durationOption(q, "ttl"); err != nil {
		return nil, err
	}
	if opts.RefreshOnRead, err = boolOption(q, "refresh_on_read"); err != nil {
		return nil, err
	}
	if v := first(q, "max_batch_bytes"); v != "" {
		if opts.MaxBatchBytes, err = strconv.Atoi(v); err != nil {
			return nil, badOption("max_batch_bytes", v, "an integer")
		}
	}
	rest := *u
	pass := url.Values{}
	for k, vs := range q {
		if !contains(redisOptions, k) {
			pass[k] = vs
		}
	}
	rest.RawQuery = pass.Encode()
	st, err := redis.Open(ctx, rest.String(), opts)
	if err != nil {
		return nil, err
	}
	return &redisStore{sessionStore[*redis.Session]{
		session:  st.Session,
		declared: session.Caps(session.CapLatest, session.CapReplace, session.CapTTL),
		close:    st.Close,
	}, st}, nil
}

type redisStore struct {
	sessionStore[*redis.Session]
	st *redis.Store
}

// ListSessions scans every primary for the layout's keys and returns the
// session ids, sorted.
func (r *redisStore) ListSessions(ctx context.Context) ([]string, error) {
	opts := r.st.Options()
	prefix := opts.KeyPrefix
	var mu sync.Mutex // ForEachMaster scans the primaries concurrently
	seen := map[string]bool{}
	scan := func(ctx context.Context, c goredis.UniversalClient) error {
		match := prefix + ":{*}:items"
		if opts.Layout == redis.LayoutPython {
			match = prefix + ":*:messages"
		}
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			key := it.Val()
			var id string
			ok := false
			if opts.Layout == redis.LayoutPython {
				id, ok = strings.CutSuffix(strings.TrimPrefix(key, prefix+":"), ":messages")
				ok = ok && strings.HasPrefix(key, prefix+":")
			} else {
				var kind redis.KeyKind
				id, kind, ok = redis.ParseKey(prefix, key)
				ok = ok && kind == redis.KeyItems
			}
			if ok {
				mu.Lock()
				seen[id] = true
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	if cc, ok := r.st.Client().(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.st.Client())
	}
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// AppendRaw pushes raw onto the session's item list, unvalidated (the
// list is the first of the session's keys in either layout).
func (r *redisStore) AppendRaw(ctx context.Context, id string, raw []byte) error {
	s, err := r.st.Session(id)
	if err != nil {
		return err
	}
	return r.st.Client().RPush(ctx, s.Keys()[0], raw).Err()
}
