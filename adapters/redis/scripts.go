package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
)

// The scripts take the session's keys in KEYS, always in the same order:
// KEYS[1] the items list, KEYS[2] the metadata hash, and in the Python
// layout KEYS[3] the counter. Every key of a session is listed, so a
// script can expire them all together, and in the native layout they share
// one hash tag, so each script is single-slot in a cluster.
//
// They use redis.call, never pcall: an error aborts the script. Redis does
// not roll back the writes a script made before an error, so each write
// script starts with the write that can fail (HSET on the metadata hash
// fails with WRONGTYPE if the key holds something else) and puts the items
// last, in one RPUSH per chunk: only the first chunk can fail (WRONGTYPE,
// or OOM, which Redis checks on a script's first write only), so a batch is
// never half-present.
//
// ARGV of the write scripts: ttl in milliseconds (0: none), the session id,
// the timestamp unit ("ms" native, "s" Python), then the items.

// The write scripts are composed from these pieces, in this order: the
// metadata first, so that a key of the wrong type aborts the script before
// any item is touched (Redis does not roll back a script's earlier writes).
const (
	// stampSrc stamps the metadata hash with the server's clock.
	stampSrc = `
local n = #ARGV
local t = redis.call('TIME')
local now = t[1]
if ARGV[3] == 'ms' then now = now .. string.format('%03d', math.floor(tonumber(t[2]) / 1000)) end
redis.call('HSET', KEYS[2], 'session_id', ARGV[2], 'updated_at', now)
redis.call('HSETNX', KEYS[2], 'created_at', now)
`
	// pushExpireSrc pushes ARGV[4:] in chunks (unpack of a huge list would
	// overflow Lua's C stack), refreshes every key's expiry, and returns the
	// number of items pushed.
	pushExpireSrc = `
for i = 4, n, 4000 do
  local j = i + 3999
  if j > n then j = n end
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, j))
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
end
return n - 3
`
)

// appendSrc appends a batch and updates the metadata.
const appendSrc = stampSrc + pushExpireSrc

// replaceSrc replaces the history atomically; with no items it deletes
// every key of the session, as Clear does.
const replaceSrc = `
if #ARGV == 3 then
  redis.call('DEL', unpack(KEYS))
  return 0
end
` + stampSrc + `
redis.call('DEL', KEYS[1])
` + pushExpireSrc

// popSrc pops the newest record and refreshes the expiry of every key;
// ARGV[1] is the ttl in milliseconds. It returns {record, remaining
// length} (so the record's index is the remaining length) or nil.
const popSrc = `
local v = redis.call('RPOP', KEYS[1])
if not v then return false end
local ttl = tonumber(ARGV[1])
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
return {v, redis.call('LLEN', KEYS[1])}
`

// rangeSrc reads LRANGE KEYS[1] ARGV[2] ARGV[3] and refreshes the expiry
// of every key to ARGV[1] milliseconds, for RefreshOnRead.
const rangeSrc = `
local r = redis.call('LRANGE', KEYS[1], ARGV[2], ARGV[3])
local ttl = tonumber(ARGV[1])
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
return r
`

// touchSrc sets the expiry of every key to ARGV[1] milliseconds.
const touchSrc = `
local ttl = tonumber(ARGV[1])
for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
return 0
`

// script is a Lua script with its SHA1, computed by go-redis.
type script struct {
	src string
	sha string
}

func newScript(src string) *script { return &script{src: src, sha: goredis.NewScript(src).Hash()} }

var (
	allScripts    = []*script{appendScript, replaceScript, popScript, rangeScript, touchScript}
	appendScript  = newScript(appendSrc)
	replaceScript = newScript(replaceSrc)
	popScript     = newScript(popSrc)
	rangeScript   = newScript(rangeSrc)
	touchScript   = newScript(touchSrc)
)

// once wraps a command that must reach the server at most once. go-redis
// resends a command after some network errors (io.EOF after the write; on
// a ClusterClient also after a read timeout), even though the server may
// already have run it; for EVALSHA of the append script or for RPOP that
// would append a batch twice or drop an item. NoRetry stops that: such a
// failure is returned to the caller instead. Redirections (MOVED/ASK) are
// still followed: the redirecting node did not run the command.
type once struct{ goredis.Cmder }

// NoRetry reports true: the command is never resent.
func (once) NoRetry() bool { return true }

// evalArgs returns the arguments of EVAL or EVALSHA.
func evalArgs(verb, body string, keys []string, nargs int) []any {
	args := make([]any, 0, 3+len(keys)+nargs)
	args = append(args, verb, body, len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}

// run runs sc with EVALSHA in one round trip. If the server does not have
// the script cached (NOSCRIPT), EVALSHA did not run and the script is sent
// again in full with EVAL, which is therefore safe: the script runs once.
// This is what go-redis's Script.Run does; it is written out here so that
// both commands are sent at most once (see once).
func (st *Store) run(ctx context.Context, sc *script, keys []string, argv ...any) *goredis.Cmd {
	cmd := st.eval(ctx, "evalsha", sc.sha, keys, argv)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = st.eval(ctx, "eval", sc.src, keys, argv)
	}
	return cmd
}

func (st *Store) eval(ctx context.Context, verb, body string, keys []string, argv []any) *goredis.Cmd {
	args := append(evalArgs(verb, body, keys, len(argv)), argv...)
	cmd := goredis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = st.client.Process(ctx, once{cmd})
	return cmd
}

// LoadScripts caches the Store's Lua scripts on the server (on every master
// of a cluster), so that no later call pays the one extra round trip of a
// NOSCRIPT fallback. Open calls it; a Store made with New loads each
// script on first use instead. A server restart, failover or SCRIPT FLUSH
// empties the cache again, which costs one extra round trip per script,
// nothing more.
func (st *Store) LoadScripts(ctx context.Context) error {
	if st.closed.Load() {
		return session.ErrClosed
	}
	for _, sc := range allScripts {
		if err := st.client.ScriptLoad(ctx, sc.src).Err(); err != nil {
			return fmt.Errorf("redis: load scripts: %w", err)
		}
	}
	return nil
}
