package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// ErrMoveConflict reports a native session MovePrefix left where it was:
// its keys under the destination prefix exist already, or a key under the
// source prefix has a type the native layout never writes (a list for the
// items, a hash for the metadata), which is what a Python-layout session
// whose id names a native key leaves behind.
var ErrMoveConflict = errors.New("redis: session not moved")

// moveSrc renames the two keys of one native session (KEYS[1], KEYS[2])
// to KEYS[3], KEYS[4], all four in one hash slot, atomically: only when
// the source keys have the native types and no destination key exists.
// It returns 1 when it moved the session, 0 when there was nothing to
// move, -1 for a key of another type and -2 for an existing destination.
const moveSrc = `
local ti = redis.call('TYPE', KEYS[1]).ok
local tm = redis.call('TYPE', KEYS[2]).ok
if (ti ~= 'list' and ti ~= 'none') or (tm ~= 'hash' and tm ~= 'none') then return -1 end
if ti == 'none' and tm == 'none' then return 0 end
if redis.call('EXISTS', KEYS[3], KEYS[4]) > 0 then return -2 end
if ti == 'list' then redis.call('RENAME', KEYS[1], KEYS[3]) end
if tm == 'hash' then redis.call('RENAME', KEYS[2], KEYS[4]) end
return 1
`

var moveScript = newScript(moveSrc)

// MovePrefix moves every native-layout session stored under the key
// prefix from to the prefix to (empty means DefaultKeyPrefix), keeping
// every byte, expiry included: each session's two keys are renamed
// together, in one atomic step (they share a hash slot, in a cluster too).
// It exists for stores written with the old native default prefix
// "agents:session", which New now refuses because Python-layout ids at
// their default prefix can name its keys. It scans every primary of a
// cluster. A session whose destination keys exist, or whose keys have the
// wrong types, is left in place and reported in the returned error (each
// wrapping ErrMoveConflict); the others are moved. Running it again moves
// what is left; stop writers of the old prefix first.
func MovePrefix(ctx context.Context, client goredis.UniversalClient, from, to string) (moved int, err error) {
	if to == "" {
		to = DefaultKeyPrefix
	}
	if from == "" || from == to || strings.ContainsAny(from+to, "{}") {
		return 0, fmt.Errorf("%w: MovePrefix from %q to %q", ErrInvalidOptions, from, to)
	}
	if prefixesOverlap(to, DefaultPythonKeyPrefix) {
		return 0, fmt.Errorf("%w: destination %q", ErrPrefixOverlap, to)
	}
	var (
		mu    sync.Mutex
		errs  []error
		count int
	)
	scan := func(ctx context.Context, c goredis.UniversalClient) error {
		it := c.Scan(ctx, 0, escapeGlob(from)+":{*}:*", 1000).Iterator()
		for it.Next(ctx) {
			id, kind, ok := ParseKey(from, it.Val())
			if !ok || kind != KeyItems && !onlyMeta(ctx, c, from, id) {
				continue // each session once: through its items key, or its lone meta key
			}
			src, dst := nativeKeys(from, id), nativeKeys(to, id)
			res, err := c.EvalSha(ctx, moveScript.sha, append(src, dst...)).Int()
			if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
				res, err = c.Eval(ctx, moveScript.src, append(src, dst...)).Int()
			}
			mu.Lock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("redis: move session %q: %w", id, err))
			case res == 1:
				count++
			case res == -1:
				errs = append(errs, fmt.Errorf("%w: %q: a key under %q has a type the native layout never writes", ErrMoveConflict, id, from))
			case res == -2:
				errs = append(errs, fmt.Errorf("%w: %q: its keys under %q exist already", ErrMoveConflict, id, to))
			}
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, client)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("redis: move prefix: %w", err))
	}
	return count, errors.Join(errs...)
}

// onlyMeta reports whether the native session id under prefix has a meta
// key but no items key, so that MovePrefix moves it through its meta key.
func onlyMeta(ctx context.Context, c goredis.UniversalClient, prefix, id string) bool {
	n, err := c.Exists(ctx, nativeKeys(prefix, id)[0]).Result()
	return err == nil && n == 0
}

// escapeGlob escapes the glob metacharacters of SCAN MATCH in s.
func escapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
