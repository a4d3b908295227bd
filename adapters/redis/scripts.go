package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/session"
)

// The scripts take the session's keys in KEYS, always in the same order:
// KEYS[1] the items list, KEYS[2] the metadata hash, in the Python layout
// KEYS[3] the counter, and last (KEYS[#KEYS]) the checkpoint hash. Every
// key of a session is listed, so a script can expire them all together
// (the checkpoint hash with the history: see "Checkpoints" in the package
// documentation), and in the native layout they share one hash tag, so
// each script is single-slot in a cluster. Only the commit script writes
// the checkpoint hash; the others only refresh its expiry, and the replace
// that deletes the history leaves it alone, as Clear does. The pop
// scripts take two keys more, last: the session's pop record index and
// the call's pop record (see poprecord.go).
//
// They use redis.call, never pcall: an error aborts the script. Redis does
// not roll back the writes a script made before an error, so each write
// script starts with the write that can fail (HSET on the metadata hash
// fails with WRONGTYPE if the key holds something else) and puts the items
// last, in one RPUSH per chunk: only the first chunk can fail (WRONGTYPE,
// or OOM, which Redis checks on a script's first write only), so a batch is
// never half-present.
//
// The scripts do only what needs the server's atomicity; everything the
// client can do (timestamps, validation, sizes) it does before sending.
//
// ARGV of the write scripts: ttl in milliseconds (0: none), the session id,
// the client's clock in the layout's unit, then (commit only) the
// checkpoint's name, document and expected version, then the items, from
// ARGV[first] to ARGV[n].

// The write scripts are composed from these pieces.
const (
	// nativeStampSrc writes the native metadata (session_id, created_at)
	// only when the session's list does not exist yet: once the session
	// exists, nothing of it changes, so an append does not rewrite it. A
	// list key of another type exists too, and then the first RPUSH fails
	// before anything is written.
	nativeStampSrc = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[2], 'session_id', ARGV[2])
  redis.call('HSETNX', KEYS[2], 'created_at', ARGV[3])
` + epochEndSrc + `
end
`
	// pythonStampSrc writes what the Python SDK's add_items writes:
	// session_id and updated_at on every append, created_at once.
	pythonStampSrc = `
redis.call('HSET', KEYS[2], 'session_id', ARGV[2], 'updated_at', ARGV[3])
redis.call('HSETNX', KEYS[2], 'created_at', ARGV[3])
`
	// pushSrc pushes ARGV[first:n] in chunks (unpack of a huge list would
	// overflow Lua's C stack).
	pushSrc = `
for i = first, n, 4000 do
  local j = i + 3999
  if j > n then j = n end
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, j))
end
`
	// expireSrc refreshes every key's expiry, the checkpoint hash's too.
	expireSrc = `
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
end
`
	// writeArgsSrc names the items of an append or a replace: ARGV[4:].
	writeArgsSrc = `
local n, first = #ARGV, 4
`
	// pushExpireSrc pushes the items, refreshes every key's expiry, and
	// returns the number of items pushed.
	pushExpireSrc = pushSrc + expireSrc + `
return n - first + 1
`
	// replaceHeadSrc: replacing with no items deletes every key of the
	// history, as Clear does; the checkpoint hash (the last key) stays.
	replaceHeadSrc = `
if #ARGV == 3 then
  redis.call('DEL', unpack(KEYS, 1, #KEYS - 1))
  return 0
end
`
)

// appendSrc appends a batch in the native layout, creating the metadata
// when the session is new. AddItems sends it when there is a TTL, or when
// its plain RPUSHX found no list.
const appendSrc = writeArgsSrc + nativeStampSrc + pushExpireSrc

// pythonAppendSrc appends a batch in the Python layout.
const pythonAppendSrc = writeArgsSrc + pythonStampSrc + pushExpireSrc

// replaceSrc replaces the history atomically in the native layout: the
// metadata is checked (HSET fails on a key of another type) before the list
// is deleted, and created_at is kept.
const replaceSrc = replaceHeadSrc + writeArgsSrc + `
redis.call('HSET', KEYS[2], 'session_id', ARGV[2])
redis.call('HSETNX', KEYS[2], 'created_at', ARGV[3])
` + epochEndSrc + `
redis.call('DEL', KEYS[1])
` + pushExpireSrc

// pythonReplaceSrc replaces the history atomically in the Python layout.
const pythonReplaceSrc = replaceHeadSrc + writeArgsSrc + pythonStampSrc + `
redis.call('DEL', KEYS[1])
` + pushExpireSrc

// historyVersionFnSrc defines history_version(key), the version of the
// history in the list key: the number of records, ':', and the SHA-1 of
// every record prefixed with its length and ':' (so that no two histories
// give the same input). Equal versions mean equal records, byte for byte,
// readable or not; a missing list is the empty history.
const historyVersionFnSrc = `
local function history_version(key)
  local r = redis.call('LRANGE', key, 0, -1)
  local parts = {}
  for i, v in ipairs(r) do parts[i] = #v .. ':' .. v end
  return #r .. ':' .. redis.sha1hex(table.concat(parts))
end
`

// historyVersionSrc returns the version of the history in KEYS[1].
const historyVersionSrc = historyVersionFnSrc + `
return history_version(KEYS[1])
`

// replaceIfHeadSrc starts a conditional replace: ARGV[4] is the version
// the caller read; if the history's is another, it returns -1 having
// written nothing. Otherwise it goes on as replaceHeadSrc, with the items
// from ARGV[5].
const replaceIfHeadSrc = historyVersionFnSrc + `
if history_version(KEYS[1]) ~= ARGV[4] then return -1 end
if #ARGV == 4 then
  redis.call('DEL', unpack(KEYS, 1, #KEYS - 1))
  return 0
end
local n, first = #ARGV, 5
`

// replaceIfSrc is replaceSrc on the condition of replaceIfHeadSrc, in the
// native layout.
const replaceIfSrc = replaceIfHeadSrc + `
redis.call('HSET', KEYS[2], 'session_id', ARGV[2])
redis.call('HSETNX', KEYS[2], 'created_at', ARGV[3])
` + epochEndSrc + `
redis.call('DEL', KEYS[1])
` + pushExpireSrc

// pythonReplaceIfSrc is pythonReplaceSrc on the condition of
// replaceIfHeadSrc.
const pythonReplaceIfSrc = replaceIfHeadSrc + pythonStampSrc + `
redis.call('DEL', KEYS[1])
` + pushExpireSrc

// setTimesSrc sets the native metadata's times of a session whose list
// exists (it returns 0, writing nothing, when there is none): ARGV[1]
// created_at, ARGV[2] updated_at, each only when not empty, and with
// updated_at the version of the history it describes, updated_version,
// so that sessionTimesSrc can tell when an append (which leaves the
// metadata alone) has made it stale.
const setTimesSrc = historyVersionFnSrc + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[2], 'created_at', ARGV[1]) end
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[2], 'updated_at', ARGV[2], 'updated_version', history_version(KEYS[1]))
end
return 1
`

// sessionTimesSrc returns the native metadata's {created_at, updated_at},
// updated_at only while the history is still the one it was set for
// (updated_version): nil once the history changed, or when no version
// was recorded with it (updated_at fields of earlier versions, which
// appends no longer refresh).
const sessionTimesSrc = historyVersionFnSrc + `
local r = redis.call('HMGET', KEYS[2], 'created_at', 'updated_at', 'updated_version')
if not r[3] or r[3] ~= history_version(KEYS[1]) then r[2] = false end
return {r[1], r[2]}
`

// The checkpoint scripts compare versions as the decimal strings Redis
// keeps (HINCRBY writes them; the client formats the expected one with
// strconv), so no version goes through a Lua number on the way in. "-1" is
// session.AnyVersion, and a missing checkpoint is at version "0". A
// conflict returns {0, stored version} having written nothing.

// commitHeadSrc checks the expected version of checkpoint ARGV[4] against
// the stored one, and checks, before any write, the keys the commit will
// write: HGET fails on a checkpoint key of another type, and a version
// field that could not be advanced is refused. The items key is checked
// by the layout's script (see commitSrc and pythonCommitSrc), so that
// after the first write nothing can fail and a failed commit (like a
// conflicting one) has written nothing.
const commitHeadSrc = `
local n, first = #ARGV, 7
local ck = KEYS[#KEYS]
local vf = 'v:' .. ARGV[4]
local cur = redis.call('HGET', ck, vf)
local have = cur or '0'
if ARGV[6] ~= '-1' and ARGV[6] ~= have then return {0, have} end
if cur and (not string.match(cur, '^%d+$') or #cur > 18) then
  return redis.error_reply('ERR the stored checkpoint version is not a version number')
end
`

// commitTailSrc advances the version, stores the document, refreshes the
// expiry of every key of the session, and returns {1, new version}. A
// version of fewer than 15 digits is advanced in Lua (exact below 2^53)
// and written with the document in one HSET, as a decimal string; a
// longer one by HINCRBY, and read back as the string Redis wrote (HINCRBY's
// reply would reach Lua as a number, inexact above 2^53).
const commitTailSrc = `
local v
if #have < 15 then
  v = string.format('%d', tonumber(have) + 1)
  redis.call('HSET', ck, vf, v, 'd:' .. ARGV[4], ARGV[5])
else
  redis.call('HINCRBY', ck, vf, 1)
  redis.call('HSET', ck, 'd:' .. ARGV[4], ARGV[5])
  v = redis.call('HGET', ck, vf)
end
` + expireSrc + `
return {1, v}
`

// commitSrc is AppendWithCheckpoint (and, with no items, SaveCheckpoint)
// in the native layout: the append script's metadata and push, then the
// checkpoint save, in one script. The items key needs no check of its
// own: when it exists, the first RPUSH is the script's first write (and
// fails on a key of another type before anything is written); when it
// does not, the metadata HSET is, and the push cannot fail on its type.
// The items pass through ARGV so that the push is inside the script: an
// EVALSHA the server answers with NOSCRIPT has then written nothing, and
// the client can send the script again with EVAL. (A native RPUSH in a
// MULTI/EXEC beside an EVALSHA would be pushed even when the EVALSHA
// fails with NOSCRIPT at EXEC; beside an EVAL of the short fenceSrc it is
// cheaper than this script, and AppendWithCheckpoint commits so when it
// can: docs/performance.md.)
const commitSrc = commitHeadSrc + `
if n >= first then
` + nativeStampSrc + pushSrc + `
end
` + commitTailSrc

// pythonCommitSrc is commitSrc in the Python layout, whose metadata HSET
// comes first on every append: LLEN fails on an items key of another type
// before it.
const pythonCommitSrc = commitHeadSrc + `
if n >= first then
redis.call('LLEN', KEYS[1])
` + pythonStampSrc + pushSrc + `
end
` + commitTailSrc

// fenceSrc is the version fence of the native layout's AppendWithCheckpoint
// on an existing session (see Session.commitFenced): it runs
// in a MULTI/EXEC right after a plain RPUSH of the batch, sees none of the
// items (passing them into Lua costs more than the push), and is sent with
// EVAL, never EVALSHA: an EVALSHA answered NOSCRIPT inside EXEC would leave
// the RPUSH applied without its checkpoint (EXEC rolls nothing back), and
// EVAL cannot be answered NOSCRIPT. Its text is short because the server
// hashes it on every call.
//
// ARGV: the checkpoint's name, document, expected version and the number n
// of items pushed (and, in fenceTTLSrc, the TTL). LLEN fails, writing
// nothing, when the items key is of another type (the RPUSH failed too).
// The fence takes the n items back off
// (LTRIM) and returns, having changed nothing, {0, stored version} on a
// conflict, {2, "0"} when the commit script must run instead (the push
// created the list, whose metadata the script writes; the stored version
// is not a short decimal number, which the script advances or refuses),
// and the HGET's error on a checkpoint key of another type. Otherwise it
// advances the version and stores the document: {1, new version}.
const fenceSrc = fenceHeadSrc + `return{1,v}`

// fenceTTLSrc is fenceSrc for a Store with a TTL (ARGV[5], milliseconds):
// a commit that lands also restarts the expiry of every key of the
// session, the checkpoint hash's too, as the commit script does.
const fenceTTLSrc = fenceHeadSrc + `for _,x in ipairs(KEYS)do redis.call('PEXPIRE',x,ARGV[5])end
return{1,v}`

// fenceHeadSrc is the fence up to its answer on success.
const fenceHeadSrc = fenceReadSrc + `else h=h or'0' if ARGV[3]~='-1'and ARGV[3]~=h then r={0,h}end end
` + fenceWriteSrc

// resendSrc and resendTTLSrc are fenceSrc and fenceTTLSrc for the resend
// of a held commit whose outcome is unknown (see Session.resend): they
// also take the batch back off, as on a conflict, unless the list held
// exactly the length given as the last ARGV before the push.
const (
	resendSrc    = resendHeadSrc + `return{1,v}`
	resendTTLSrc = resendHeadSrc + `for _,x in ipairs(KEYS)do redis.call('PEXPIRE',x,ARGV[5])end
return{1,v}`
	resendHeadSrc = fenceReadSrc + `else h=h or'0' if ARGV[3]~=h or l~=n+tonumber(ARGV[#ARGV])then r={0,h}end end
` + fenceWriteSrc
)

// fenceReadSrc and fenceWriteSrc are the fence's reads, up to its check of
// the version, and its writes.
const (
	fenceReadSrc = `local c,n,f=KEYS[#KEYS],tonumber(ARGV[4]),'v:'..ARGV[1]
local l=redis.call('LLEN',KEYS[1])
local h=redis.pcall('HGET',c,f)
local r
if type(h)=='table' then r=h
elseif l==n or h and(h==''or #h>14 or h:find('%D'))then r={2,'0'}
`
	fenceWriteSrc = `if r then redis.call('LTRIM',KEYS[1],0,-n-1)return r end
local v=string.format('%d',h+1)
redis.call('HSET',c,f,v,'d:'..ARGV[1],ARGV[2])
`
)

// deleteCheckpointSrc deletes checkpoint ARGV[1] of the hash KEYS[1] if
// its version is ARGV[2] (or ARGV[2] is "-1"); it returns {1, version
// deleted} or, having changed nothing, {0, stored version}. Deleting a
// checkpoint that is not there at version "0" or "-1" succeeds. Redis
// deletes the hash with its last field.
const deleteCheckpointSrc = `
local vf = 'v:' .. ARGV[1]
local cur = redis.call('HGET', KEYS[1], vf)
local have = cur or '0'
if ARGV[2] ~= '-1' and ARGV[2] ~= have then return {0, have} end
if cur then redis.call('HDEL', KEYS[1], vf, 'd:' .. ARGV[1]) end
return {1, have}
`

// loadCheckpointSrc reads checkpoint ARGV[2] (its version and document)
// and, when it is there, refreshes the expiry of every key to ARGV[1]
// milliseconds, for RefreshOnRead.
const loadCheckpointSrc = `
local r = redis.call('HMGET', KEYS[#KEYS], 'v:' .. ARGV[2], 'd:' .. ARGV[2])
if r[1] then
  local ttl = tonumber(ARGV[1])
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
end
return r
`

// readableSrc defines readable(v), the server's cheap check that a record
// is one this library reads (a JSON object, as session.ParseItem accepts
// it, NaN and the infinities included). It errs only one way: true means
// the client will read the record, false means "not sure" (the client then
// decides).
//
// readable_full(v) is the check itself. It is true only when v starts with
// '{' and ends with '}' (no surrounding whitespace), holds no control byte
// (they are refused inside strings), is valid UTF-8 (no overlong form, no
// surrogate; checked only when a byte is not printable ASCII), parses with
// cjson (structure, strings, escapes; cjson refuses lone \u surrogates,
// which the client would read: "not sure"), and every token outside the
// strings is true, false, null, NaN, Infinity, -Infinity or a number of
// RFC 8259's grammar (tokens_ok): cjson alone also takes nan, 0x10, 01,
// 1., .5, +1, inf and NaN(1), which the client refuses.
//
// readable(v) gives the same answer, faster for the common record: one of
// printable ASCII whose escapes are all single-character ones (\n, \",
// ...). Each such escape is replaced by '_' (a string character, and no
// JSON token outside a string), the strings are then emptied ('%b""' pairs
// the quotes as a JSON lexer does once no backslash is left), and cjson
// parses only that skeleton: the skeleton parses exactly when v does, and
// holds the same tokens, without cjson building v's strings. Any other
// record goes to readable_full. Lua's byte classes cost per byte, so the
// printable-ASCII test is one anchored match ('^[ -~]*$'), not a search
// for the first byte outside.
const readableSrc = `
local function tokens_ok(skel)
  if string.find(skel, '^[{}%[%]:, "]*$') then return true end
  for tok in string.gmatch(skel, '[^{}%[%]:, "]+') do
    if tok ~= 'true' and tok ~= 'false' and tok ~= 'null' and tok ~= 'NaN'
        and tok ~= 'Infinity' and tok ~= '-Infinity' then
      local p = string.match(tok, '^%-?0()') or string.match(tok, '^%-?[1-9]%d*()')
      if not p then return false end
      p = string.match(tok, '^%.%d+()', p) or p
      p = string.match(tok, '^[eE][%+%-]?%d+()', p) or p
      if p ~= #tok + 1 then return false end
    end
  end
  return true
end
local function readable_full(v)
  if string.byte(v, 1) ~= 123 or string.byte(v, -1) ~= 125 then return false end
  if not string.find(v, '^[ -~]*$') then
    if string.find(v, '[%z\1-\31]') then return false end
    local t = string.gsub(v, '[\194-\223][\128-\191]', ' ')
    t = string.gsub(t, '\224[\160-\191][\128-\191]', ' ')
    t = string.gsub(t, '[\225-\236\238\239][\128-\191][\128-\191]', ' ')
    t = string.gsub(t, '\237[\128-\159][\128-\191]', ' ')
    t = string.gsub(t, '\240[\144-\191][\128-\191][\128-\191]', ' ')
    t = string.gsub(t, '[\241-\243][\128-\191][\128-\191][\128-\191]', ' ')
    t = string.gsub(t, '\244[\128-\143][\128-\191][\128-\191]', ' ')
    if string.find(t, '[\128-\255]') then return false end
  end
  if not pcall(cjson.decode, v) then return false end
  local skel = v
  if string.find(skel, '\\', 1, true) then skel = string.gsub(skel, '\\.', '') end
  skel = string.gsub(skel, '%b""', '')
  return tokens_ok(skel)
end
local function readable(v)
  if string.byte(v, 1) ~= 123 or string.byte(v, -1) ~= 125 then return false end
  if not string.find(v, '^[ -~]*$') then return readable_full(v) end
  local t = v
  if string.find(t, '\\', 1, true) then
    t = string.gsub(t, '\\["\\/bfnrt]', '_')
    if string.find(t, '\\', 1, true) then return readable_full(v) end
  end
  local skel = string.gsub(t, '%b""', '""')
  if not pcall(cjson.decode, skel) then return false end
  return tokens_ok(skel)
end
`

// popSrc is PopItem's one round trip: it pops the newest record and
// returns it (a bulk string) if readable (readableSrc) says the client
// will read it, refreshing the expiry of every key with a TTL (ARGV[1],
// milliseconds); it returns nil for an empty (or missing) list. A record
// readable is not sure of is pushed back where it was and returned as
// {record} (an array), so that the client decides (popIfSrc): the script
// is atomic, so no one sees the list without it, and Redis lets a script
// that has written go on writing (no OOM refusal), so the push cannot
// fail. Popping first saves the copy a read (LINDEX) before the pop would
// make of every record. When the record was the list's only element, the
// pop deleted the key and its expiry: the expiry read first (PTTL) is set
// again, so the push-back leaves the list as it was (its expiry may end
// up later by the milliseconds the script ran, never earlier).
const popSrc = popTakeSrc + popDoneSrc

// popTakeSrc and popDoneSrc are popSrc before and after the pop is
// settled; the native layout's pop records it between them (nativePopSrc).
//
// The last key (KEYS[#KEYS]) is the pop record of the call's token (see
// "Lost replies" in the package documentation), ARGV[2] its lifetime in
// milliseconds: when the record exists, the token has popped already (or
// RecoverPop settled it), and the script returns {0, record} having
// changed nothing; a pop stores 'i' .. the item there. The key before it
// (KEYS[#KEYS - 1]) is the session's pop record index (popIndexPart),
// where the pop indexes its record; ZCARD reads it before the first write
// so that an index of another type fails the script with nothing
// written. The record and the index are listed last so that the expiry
// loop, which refreshes every key, runs before they are set with their
// own lifetime.
const (
	popTakeSrc = readableSrc + `
local rec = redis.call('GET', KEYS[#KEYS])
if rec then return {0, rec} end
redis.call('ZCARD', KEYS[#KEYS - 1])
local pttl = redis.call('PTTL', KEYS[1])
local v = redis.call('RPOP', KEYS[1])
if not v then return false end
if not readable(v) then
  redis.call('RPUSH', KEYS[1], v)
  if pttl > 0 and redis.call('LLEN', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], pttl) end
  return {v}
end
`
	popDoneSrc = expireSrc + popRecordSrc + `
return v
`
	// popRecordSrc records the item v popped under the call's token and
	// indexes the record (popIndexSrc).
	popRecordSrc = `
redis.call('SET', KEYS[#KEYS], 'i' .. v, 'PX', ARGV[2])
` + popIndexSrc
	// popIndexSrc adds the record KEYS[#KEYS] to the index KEYS[#KEYS -
	// 1], scored with its expiry by the server's clock (TIME: Redis 7
	// replicates a script's effects, not the script), drops the entries
	// already expired, and sets the index's expiry to the record's
	// lifetime, ARGV[2]: the index outlives every record it names.
	popIndexSrc = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[#KEYS - 1], '-inf', '(' .. now)
redis.call('ZADD', KEYS[#KEYS - 1], now + ARGV[2], KEYS[#KEYS])
redis.call('PEXPIRE', KEYS[#KEYS - 1], ARGV[2])
`
)

// popIfSrc pops the newest valid item only if the newest records are still,
// byte for byte, the ones the client read and checked: ARGV[1] is the ttl
// in milliseconds, ARGV[2] the pop record's lifetime, ARGV[3] the item to
// pop and ARGV[4:] the unreadable records above it, oldest first. Those
// are put back unchanged (with the list's expiry, should the list have
// been emptied on the way), so only the item is removed, and recorded
// under the token (the last key) and indexed (the key before it), as
// popSrc does. It returns 1 when it popped, 0 (having changed nothing)
// when the records differ. PopItem sends it only when popSrc was not sure
// of the newest record.
const popIfSrc = popIfCheckSrc + popIfDoneSrc

// popIfCheckSrc and popIfDoneSrc are popIfSrc before and after the check;
// the native layout's pop records the pop between them (nativePopIfSrc).
// ARGV[2] is the lifetime of the pop record (KEYS[#KEYS]), as in popSrc:
// when the record exists, the script returns it (a bulk string) having
// changed nothing. KEYS[#KEYS - 1] is the pop record index, as in popSrc.
const popIfCheckSrc = `
local rec = redis.call('GET', KEYS[#KEYS])
if rec then return rec end
redis.call('ZCARD', KEYS[#KEYS - 1])
local m = #ARGV - 2
local cur = redis.call('LRANGE', KEYS[1], -m, -1)
if #cur ~= m then return 0 end
for i = 1, m do
  if cur[i] ~= ARGV[i + 2] then return 0 end
end
`

// popIfDoneSrc: see popIfSrc.
const popIfDoneSrc = `
local pttl = -1
if m > 1 then pttl = redis.call('PTTL', KEYS[1]) end
redis.call('LTRIM', KEYS[1], 0, -m - 1)
for i = 2, m, 4000 do
  local j = i + 3999
  if j > m then j = m end
  redis.call('RPUSH', KEYS[1], unpack(cur, i, j))
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ttl) end
elseif pttl > 0 then
  redis.call('PEXPIRE', KEYS[1], pttl)
end
local v = cur[1]
` + popRecordSrc + `
return 1
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
	allScripts = []*script{appendScript, pythonAppendScript, replaceScript, pythonReplaceScript,
		replaceIfScript, pythonReplaceIfScript, historyVersionScript, setTimesScript, sessionTimesScript,
		popScript, popIfScript, rangeScript, touchScript, commitScript, pythonCommitScript, deleteCheckpointScript,
		loadCheckpointScript, nativePopScript, nativePopIfScript, onceScript, pythonOnceScript, recoverPopScript}
	appendScript          = newScript(appendSrc)
	pythonAppendScript    = newScript(pythonAppendSrc)
	replaceScript         = newScript(replaceSrc)
	pythonReplaceScript   = newScript(pythonReplaceSrc)
	replaceIfScript       = newScript(replaceIfSrc)
	pythonReplaceIfScript = newScript(pythonReplaceIfSrc)
	historyVersionScript  = newScript(historyVersionSrc)
	setTimesScript        = newScript(setTimesSrc)
	sessionTimesScript    = newScript(sessionTimesSrc)
	popScript             = newScript(popSrc)
	popIfScript           = newScript(popIfSrc)
	rangeScript           = newScript(rangeSrc)
	touchScript           = newScript(touchSrc)

	commitScript           = newScript(commitSrc)
	pythonCommitScript     = newScript(pythonCommitSrc)
	deleteCheckpointScript = newScript(deleteCheckpointSrc)
	loadCheckpointScript   = newScript(loadCheckpointSrc)
)

// once: the types onceCmd, onceInt, onceStatus, onceSlice and onceString
// wrap a command that must reach the server at most once. go-redis
// resends a command after some network errors (io.EOF after the write; on
// a ClusterClient also after a read timeout), even though the server may
// already have run it; for EVALSHA of the append script or for RPOP that
// would append a batch twice or drop an item. NoRetry stops that: such a
// failure is returned to the caller instead. Redirections (MOVED/ASK) are
// still followed: the redirecting node did not run the command. There is
// one type per type of command, each one pointer wide, so that passing it
// as a Cmder does not allocate.
type (
	onceCmd    struct{ *goredis.Cmd }
	onceInt    struct{ *goredis.IntCmd }
	onceStatus struct{ *goredis.StatusCmd }
	onceSlice  struct{ *goredis.SliceCmd }
	onceString struct{ *goredis.StringCmd }
)

// NoRetry reports true: the command is never resent.
func (onceCmd) NoRetry() bool    { return true }
func (onceInt) NoRetry() bool    { return true }
func (onceStatus) NoRetry() bool { return true }
func (onceSlice) NoRetry() bool  { return true }
func (onceString) NoRetry() bool { return true }

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
	return st.runOn(ctx, st.client, sc, keys, argv...)
}

// runOn is run through p: the Store's client, or one of its connections
// (see Store.write).
func (st *Store) runOn(ctx context.Context, p processor, sc *script, keys []string, argv ...any) *goredis.Cmd {
	cmd := eval(ctx, p, "evalsha", sc.sha, keys, argv)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = eval(ctx, p, "eval", sc.src, keys, argv)
	}
	return cmd
}

func eval(ctx context.Context, p processor, verb, body string, keys []string, argv []any) *goredis.Cmd {
	args := append(evalArgs(verb, body, keys, len(argv)), argv...)
	cmd := goredis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = p.Process(ctx, onceCmd{cmd})
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
