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

// moveSrc renames the keys of one native session (KEYS[1] items, KEYS[2]
// meta, KEYS[3] checkpoints) to KEYS[4], KEYS[5], KEYS[6], all six in one
// hash slot, atomically: only when the source keys have the native types
// and no destination key exists. The checkpoint hash moves only when
// ARGV[1] is "1" (see MovePrefix). It returns 1 when it moved the session,
// 0 when there was nothing to move, -1 for a key of another type and -2
// for an existing destination.
const moveSrc = `
local ti = redis.call('TYPE', KEYS[1]).ok
local tm = redis.call('TYPE', KEYS[2]).ok
local tc = 'none'
if ARGV[1] == '1' then tc = redis.call('TYPE', KEYS[3]).ok end
if (ti ~= 'list' and ti ~= 'none') or (tm ~= 'hash' and tm ~= 'none') or (tc ~= 'hash' and tc ~= 'none') then return -1 end
if ti == 'none' and tm == 'none' and tc == 'none' then return 0 end
if redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6]) > 0 then return -2 end
if ti == 'list' then redis.call('RENAME', KEYS[1], KEYS[4]) end
if tm == 'hash' then redis.call('RENAME', KEYS[2], KEYS[5]) end
if tc == 'hash' then redis.call('RENAME', KEYS[3], KEYS[6]) end
return 1
`

var moveScript = newScript(moveSrc)

// MovePrefix moves every native-layout session stored under the key
// prefix from to the prefix to (empty means DefaultKeyPrefix), keeping
// every byte, expiry included: each session's keys (items, metadata and
// checkpoint hash) are renamed together, in one atomic step (they share a
// hash slot, in a cluster too). Under a from prefix in the Python layout's
// default key space ("agents:session", the old native default) checkpoint
// hashes are not moved: no native store ever wrote one there (New refused
// such a prefix before checkpoints existed), so a key there that looks
// like one is a Python-layout session's ("agents:session:{x}:checkpoints"
// is the checkpoint hash of the Python-layout id "{x}").
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
	moveCheckpoints := !prefixesOverlap(from, DefaultPythonKeyPrefix)
	flag := "0"
	if moveCheckpoints {
		flag = "1"
	}
	scan := func(ctx context.Context, c goredis.UniversalClient) error {
		it := c.Scan(ctx, 0, escapeGlob(from)+":{*}:*", 1000).Iterator()
		for it.Next(ctx) {
			id, kind, ok := ParseKey(from, it.Val())
			if !ok || !movesThrough(ctx, c, from, id, kind, moveCheckpoints) {
				continue // each session once: through its first key that exists
			}
			src := append(nativeKeys(from, id), nativeCheckpointKey(from, id))
			dst := append(nativeKeys(to, id), nativeCheckpointKey(to, id))
			keys := append(src, dst...)
			res, err := c.EvalSha(ctx, moveScript.sha, keys, flag).Int()
			if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
				res, err = c.Eval(ctx, moveScript.src, keys, flag).Int()
			}
			mu.Lock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("redis: move session %q: %w", id, sent(err)))
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

// movesThrough reports whether MovePrefix moves the native session id
// under prefix when its scan meets the key of that kind: through its items
// key; through its meta key when it has no items key; through its
// checkpoint hash (when those move at all) when it has neither.
func movesThrough(ctx context.Context, c goredis.UniversalClient, prefix, id string, kind KeyKind, checkpoints bool) bool {
	keys := nativeKeys(prefix, id)
	switch kind {
	case KeyItems:
		return true
	case KeyMeta:
		keys = keys[:1]
	case KeyCheckpoints:
		if !checkpoints {
			return false
		}
	default:
		return false
	}
	n, err := c.Exists(ctx, keys...).Result()
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
