// Package redis is the Session adapter for Redis, on
// github.com/redis/go-redis/v9. One adapter serves a standalone server, a
// sentinel-managed primary and a Redis Cluster: it talks to a
// goredis.UniversalClient.
//
//	st, err := redis.Open(ctx, "redis://localhost:6379/0", redis.Options{TTL: 24 * time.Hour})
//	defer st.Close()
//	s, err := st.Session("user-123")
//	err = s.AddItems(ctx, items)
//
// New wraps a client the caller built (and keeps owning: Close leaves it
// open); Open builds one from a URL (redis://, rediss://, unix://,
// redis+cluster://h1:p1,h2:p2, redis+sentinel://s1:p1?master_name=NAME)
// and closes it on Close.
//
// # Key layout (LayoutNative, the default)
//
// A session is two keys, and a third once it holds checkpoints:
//
//	<prefix>:{<escaped id>}:items         list of items, oldest first, each the item's JSON bytes as given
//	<prefix>:{<escaped id>}:meta          hash: session_id, created_at (Unix milliseconds, client clock);
//	                                      updated_at and updated_version once a copy set them;
//	                                      follow_epoch, follow_marks (see "Following")
//	<prefix>:{<escaped id>}:checkpoints   hash: v:<name> (version), d:<name> (document); see "Checkpoints";
//	                                      o:<operation id> (see "Operations that land once")
//
// The prefix defaults to "agents:native" (DefaultKeyPrefix; see "Two
// layouts in one database" for why not the Python SDK's). The metadata is
// written when the session's list is created and never rewritten by an
// append, as nothing of it changes (stores written by earlier versions
// also hold an updated_at field, which is left alone). A copy or repair
// (sessionctl migrate, through the URL store's SetSessionTimes) sets
// updated_at to its source's time, with updated_version, the history's
// version (Session.HistoryVersion) it describes: the store reports that
// updated_at only while the history is unchanged, since appends do not
// refresh it. The braces are a
// Redis Cluster hash tag: Redis hashes only the substring between the
// first '{' of a key and the first '}' after it, so all keys of a session
// hash to the same slot and every operation below is a single-slot, atomic
// step on one server, in a cluster too. For that to hold for every id, the prefix may
// not contain braces (New refuses it), and the id is escaped: '%', '{', '}'
// and ':' become %25, %7B, %7D and %3A; every other byte (NUL, quotes,
// '*', invalid UTF-8, ...) is kept, as Redis keys are binary safe. The
// escaped id therefore holds no brace, so the tag is exactly the escaped
// id, and the escaping is injective ('%' is escaped too), so no id can
// produce another session's tag or keys. Escaping ':' is not needed for
// safety (the fixed ":items"/":meta"/":checkpoints" suffix follows the closing brace) but
// keeps ids from looking like extra key segments in tools that split keys
// on ':'. ParseKey turns a key back into its session id. Percent-escaping
// keeps ordinary ids readable in redis-cli, unlike hex encoding.
//
// # Round trips
//
// Round trips per operation (tests count them with a go-redis hook):
//
//	AddItems      1  native, no TTL: RPUSHX of all the items, nothing else (concurrent callers'
//	                 share pipelines, below); when the list does not exist yet (RPUSHX writes
//	                 nothing and answers 0), 1 more: the append script
//	              1  native with a TTL: MULTI, RPUSHX, PEXPIRE of each key, EXEC (one round trip);
//	                 1 more, the append script, when the list does not exist yet
//	              1  Python layout: EVALSHA of the append script: metadata, RPUSH all items
//	                 (4000 per RPUSH inside the script, below Lua's C-stack limit on unpack),
//	                 PEXPIRE every key
//	Items         1  LRANGE 0 -1
//	LatestItems   1  LRANGE -n -1; only when corrupt records are among the newest n does the
//	                 window double and get read again, whole (one more round trip each time)
//	PopItem       1  EVALSHA of a script that pops the newest record and returns it if a cheap
//	                 check on the server says the client reads it (native: and records the pop in
//	                 the metadata, for cursors: HMGET, and LLEN, HSET when someone follows the
//	                 session); a record the check is not
//	                 sure of (see "Corrupt records") goes back in place, expiry included, in the
//	                 same script, and 1 more: a script that pops it only if it is still the
//	                 newest, byte for byte; the read window doubles (one more round trip each
//	                 time) while it holds unreadable records only
//	Clear         1  DEL of every key of the history (the checkpoint hash stays)
//	ReplaceItems  1  EVALSHA: metadata + DEL + RPUSH + PEXPIRE, atomically
//	HistoryVersion 1 EVALSHA: LRANGE 0 -1 and the SHA-1 of the records, on the server
//	ReplaceItemsIf 1 EVALSHA: the version again, and on a match ReplaceItems's work, atomically
//	Touch         1  EVALSHA: PEXPIRE every key, the checkpoint hash's too
//	ExpiresIn     1  PTTL of the items list; 1 more, PTTL of the checkpoint hash, when there is
//	                 no list
//	SaveCheckpoint 1 EVALSHA of the commit script: version check, version and document, PEXPIRE
//	                 every key
//	AppendWithCheckpoint
//	              1  native, onto a session the handle appended to before: MULTI, RPUSH of the
//	                 items, EVAL of the fence (LLEN, HGET of the version; on a conflict or a
//	                 failure LTRIM takes the items back off; else HSET of version and document,
//	                 PEXPIRE every key with a TTL), EXEC; 1 more, the commit script, when the fence
//	                 finds that the push created the list (someone deleted the history) or a
//	                 version it leaves to the script
//	              1  otherwise: EVALSHA of the commit script, the items in ARGV: version and key
//	                 types checked, then the metadata, RPUSH, version and document, PEXPIRE
//	                 every key
//	              1  the third and later of a handle's commits in a row (each within a second
//	                 of the last): on the connection held for the session, MULTI, RPUSH, HSET
//	                 of version and document (PEXPIRE every key with a TTL), EXEC, then WATCH
//	                 and the reads under it for the next commit; no script. 1 more, the usual
//	                 commit, when the session changed since the last (the server refuses the
//	                 EXEC, having run nothing); and 1 more after the second commit in a row,
//	                 the WATCH that starts holding the connection (see "Held connections")
//	LoadCheckpoint 1 HMGET of the version and the document (a script with RefreshOnRead and a TTL)
//	DeleteCheckpoint 1 EVALSHA: version check, HDEL
//	ListCheckpoints 1 HKEYS of the checkpoint hash
//	ItemsSince    1  native: MULTI, HMGET of the follow fields, LRANGE from the cursor on, EXEC
//	                 (with RefreshOnRead and a TTL, PEXPIRE of every key too); 1 more, the same
//	                 with HSETNX of the epoch first, when the session has none yet (the first
//	                 read that returns a cursor); Python layout: LRANGE 0 -1, as ReadSince's
//	                 fallback
//	AddItemsOnce  1  EVALSHA: the operation id checked, then the append script's work and the id
//	                 recorded, PEXPIRE every key
//
// The scripts do only what needs the server's atomicity: timestamps,
// validation and sizes are the client's work, with one exception: PopItem's
// script checks the newest record before popping it, as a pop in one round
// trip must, since a record is deleted only if the client will read it.
// Lua's cjson alone would not do (it takes records this library refuses,
// such as nan, 0x10, 01, invalid UTF-8 or raw control bytes in strings),
// so the check is cjson plus what cjson lets through, and errs one way
// only: a record it is not sure of (one cjson refuses but the client
// reads, such as a lone \u surrogate, surrounding whitespace or an
// indented object) is put back in place and returned, and the client
// decides. For the common record (printable ASCII, single-character
// escapes) cjson parses only the record's skeleton, its strings emptied.
//
// With RefreshOnRead and a TTL, Items and LatestItems run LRANGE and the
// PEXPIREs in one script: still one round trip. The first script call on
// a server that has not cached the script costs one more (EVALSHA answers
// NOSCRIPT without running anything, and the script is sent with EVAL).
//
// Atomicity: a batch is one command (RPUSHX), one script, or one
// MULTI/EXEC (an append with a TTL), and Redis runs each
// without interleaving any other command, so concurrent
// writers (other goroutines, clients, processes) never interleave inside a
// batch and there is no optimistic retry. A script's writes are not rolled
// back if it fails midway, so the write scripts do the write that can fail
// (HSET of the metadata) first and push the items last; only the first
// RPUSH can fail, so a batch is present wholly or not at all: a key of
// the session clobbered with another type makes the write fail with
// nothing written (with a TTL, an append's MULTI/EXEC still refreshes the
// expiry of the session's keys), or (the metadata of a session whose list
// exists, which an append does not touch) is left as it is. Write commands (RPUSHX, the
// scripts, Clear's DEL and RemoveSession's MULTI/DEL/EXEC) are sent with go-redis's
// NoRetry: go-redis otherwise resends a command after some network errors
// even when the server may have run it, which would append a batch twice,
// drop a popped item, or delete what other clients appended between the
// two DELs. Such an error reaches the caller, and the batch
// may or may not have been stored (never in part). A mutation that has
// been sent runs to completion even if its context is cancelled meanwhile.
//
// Concurrent appends are pipelined: a caller that finds no append of the
// Store in flight sends its RPUSHX at once (a lone writer pays nothing),
// and the callers that come meanwhile are sent together, as one pipeline,
// when it returns: one write and one read for all of them, on the client
// and on the server, instead of one each. Each command stays its own
// atomic single-key step with its own result (a failing batch fails only
// its own caller), is sent at most once (pipelines honour NoRetry), and
// each caller returns when its own command has been answered.
//
// With Options.WaitReplicas every write costs one more round trip: WAIT,
// on the write's connection (see "Replica acknowledgement").
//
// # Replica acknowledgement
//
// Redis replicates asynchronously: a write is acknowledged once the
// primary has it, and a failover (sentinel promoting a replica, or a
// cluster replica taking over) loses the writes the promoted replica had
// not received yet, acknowledged or not. Options.WaitReplicas (URL:
// ?wait_replicas=1&wait_timeout=500ms) narrows that window: every write
// (AddItems, PopItem, Clear, ReplaceItems, ReplaceItemsIf, SaveCheckpoint,
// AppendWithCheckpoint, DeleteCheckpoint, Touch) is followed by WAIT
// numreplicas timeout on the connection that sent it, and is acknowledged
// only once that many replicas have it. When fewer acknowledge within
// Options.WaitTimeout (or WAIT fails), the write returns a *ReplicaError,
// which wraps session.ErrOutcomeUnknown and names how many replicas
// acknowledged of how many asked: the write happened on the primary, but
// a failover may lose it, so read the session before writing it again
// (PopItem returns the item it popped with that error). A write that
// changed nothing (a checkpoint conflict, ErrHistoryChanged, an empty
// pop) waits for nothing.
//
// WAIT does not make Redis strongly consistent: the replicas have the
// write in memory, not necessarily on disk; a failover may still promote a
// replica that did not acknowledge (with several replicas, or one that
// caught up from a later primary); a write that returned the error may
// survive, or not; and reads are not affected. It narrows the window in
// which an acknowledged write can be lost to those cases. With
// WaitReplicas, concurrent appends are not pipelined together (each write
// and its WAIT take one connection of the pool), and in a cluster the
// write goes to the key's primary as the client's slot map names it; a
// resharding in the meantime makes the write fail (MOVED) with nothing
// written.
//
// On a sentinel deployment whose acknowledged appends must survive a
// failover, use ?wait_replicas=1: without it an earlier campaign lost 16
// to 18 % of acknowledged batches across failovers, with it none; it cost
// 0.53 to 0.64 of the batches a second with the replica on loopback
// (BenchmarkWaitReplicas; 0.18 to 0.22 in that campaign's setup), more the
// longer the round trip to the replica (see "Redis sentinel" in
// docs/reliability.md).
//
// # TTL
//
// With Options.TTL, every write (AddItems, ReplaceItems, PopItem,
// SaveCheckpoint, AppendWithCheckpoint) sets the expiry of all the
// session's keys together, the checkpoint hash included, inside the
// write's own script or MULTI/EXEC, so a session's items, metadata and
// checkpoints always expire together and never part of a batch. Reads
// refresh the expiry only with RefreshOnRead. Expiry runs on the server's
// clock in milliseconds. The Session implements session.Expirer: TTL,
// ExpiresIn (PTTL of the items list, else of the checkpoint hash) and
// Touch.
//
// # Checkpoints
//
// A Session implements session.CheckpointStore and
// session.CheckpointCommitter. A session's checkpoints live in one hash,
// the checkpoint hash (Session.CheckpointKey), two fields per name: v:<name>
// holds the version (a decimal integer, advanced with HINCRBY) and d:<name>
// the document's bytes as given. In the native layout it carries the
// session's hash tag, so it sits in the slot of the session's other keys
// and every checkpoint operation, like every other, is one single-slot
// atomic step in a cluster too.
//
// Every checkpoint write is one script: a save compares the expected
// version with the stored one (as decimal strings; "0" when none is
// stored, AnyVersion skips it) and writes nothing on a mismatch;
// AppendWithCheckpoint lands the batch and the checkpoint together or not
// at all: it is the append script's metadata and push plus that save, in
// the same script, which checks every key it writes (types, the stored
// version) before its first write, so a failure, like a conflict, leaves
// everything as it was, byte for byte. The items pass through the
// script's ARGV, so that an EVALSHA the server answers with NOSCRIPT has
// pushed nothing and is sent again, once, with EVAL. In the native layout
// a handle that has appended to the session before commits
// more cheaply (getting the items into Lua costs more than pushing them):
// MULTI, a plain RPUSH of the items, the fence, EXEC. The fence is a short
// script that sees only the number of items pushed: it checks the version
// and, on a conflict or a failure, takes the items back off with LTRIM,
// inside the same transaction, so nothing else runs between the push and
// its undoing and the commit leaves nothing, byte for byte. It is sent
// with EVAL, never EVALSHA: EXEC rolls nothing back, so an EVALSHA
// answered NOSCRIPT there would leave the push without its checkpoint.
// When the push created the list (the history was deleted since), the
// fence takes it back off and the commit script runs. (A fenced commit that
// writes nothing still shows as an RPUSH and an LTRIM to keyspace
// notifications and to another client's WATCH of the items list.) Clear and a replace
// with no items keep the checkpoint hash (and the pop records: see "Lost
// replies"); RemoveSession (and sessionctl check's cleanup, through the
// URL store) deletes them with the rest, and MovePrefix moves the
// checkpoint hash with the rest. ListSessions lists the sessions holding items: a session whose
// only key is its checkpoint hash is not listed (nor is one whose only key
// is its metadata).
//
// # Held connections
//
// A Run commits turn after turn through one handle, and a script costs
// the server more than the commands it runs (the fence's EVAL takes about
// twice the time of the RPUSH beside it). So a handle whose commits
// (AppendWithCheckpoint) follow each other within a second holds a
// connection for the session: after the second commit in a row it takes
// an idle connection from the pool (never waiting for one) and sends
// WATCH of the items list and the checkpoint hash, LLEN of the list and
// HGET of the checkpoint's version. If the list is there and the version
// is the one the commit wrote, the next commit of that checkpoint at that
// version is sent on that connection as MULTI, RPUSH of the items, HSET of
// the next version and the document (PEXPIRE of every key with a TTL),
// EXEC, and then WATCH, LLEN and HGET again for the commit after it, in
// one round trip.
//
// This is the fence without a script: the server runs the EXEC only if
// neither key changed since the WATCH, and when the WATCH began the
// version was the expected one and the list existed, which is what the
// fence checks. Any write to either key in between (another handle's
// append, save, delete or Clear, this handle's own other writes, an
// expiry) makes the server answer the EXEC with nil, having run nothing,
// as it does for EXECABORT (a command refused when queued: OOM, MOVED,
// READONLY after a failover); the commit then takes the usual way, so a
// conflict is still reported as one, with nothing written. A lost reply
// is settled before it is reported: the same commit is sent once more
// through the pool, fenced on the version and on the list's length the
// held commit was armed with. That resend dirties the watched keys, so
// should the held EXEC still reach the server it aborts: at most one of
// the two lands. If the held commit never ran (the server closed the
// connection within the second after a commit: a restart, a failover
// that demotes it, CLIENT KILL, a timeout setting under a second), the
// resend is the commit and it succeeds. If the held commit ran, or
// another writer moved the version or the length meanwhile, the resend
// writes nothing and the error wraps session.ErrOutcomeUnknown, as for
// every write whose reply is lost. (Only a held commit that ran and was
// then undone by others, the checkpoint deleted and saved back to the
// same version and the list cut back to the same length, would let the
// resend land as well.)
//
// The connection is closed, never put back in the pool with its WATCH,
// after a second without a commit, when a commit brings another version
// or checkpoint name than the one watched, when anything goes wrong on it,
// and on Close. A Store holds at most Options.HeldConns connections
// (DefaultHeldConns, 4), and at most a quarter of its client's pool size
// (of each node's, in a cluster), and none with a negative value; a commit that
// finds the handle's connection busy (another goroutine's commit) takes
// the usual way. It is the native layout's only, without WaitReplicas and
// with no TTL or one above ten seconds, on a *goredis.Client (standalone,
// sentinel) or a *goredis.ClusterClient (the connection is to the
// session's primary); never on a Ring.
//
// # Following
//
// A Session implements session.Follower: ItemsSince reads what was
// appended after a cursor, at a cost that follows what is new. A list has
// no stable ids, so a native cursor holds positions (the records up to the
// last readable one it was given, and those it read past), the epoch of
// the metadata and its pop count, and every removal this package makes
// while someone follows the session is recorded in the metadata by the
// script that makes it:
//
//	follow_epoch  64 random bits, set by the first ItemsSince that returns a cursor (HSETNX, in
//	              the MULTI of its second round trip); deleted when the list is created and by
//	              every replace, and with the metadata by Clear, expiry and RemoveSession
//	follow_marks  for the pops still relevant, "d,l" pairs: pop number d (since the epoch
//	              began) removed index l; the last d is the pop count. At most 2000 bytes of
//	              them (some 200 marks): beyond that the two oldest are merged, which can only
//	              report a cursor lost early, and only one older than those pops
//
// A cursor is intact while the epoch is its own and no pop since removed
// an index below its last readable item; otherwise ItemsSince returns
// session.ErrCursorLost. Appends record nothing (AddItems is still one
// RPUSHX): an append never moves a record below a cursor. A pop reads the
// two fields in its own script (one HMGET more on the server, nothing
// more on the wire) and, when there is an epoch, records its index (LLEN,
// HSET). Sessions written before these fields existed are followed as
// they are: the first ItemsSince starts their epoch. Writers of an
// earlier version of this package on a followed session pop without
// recording: upgrade them first.
//
// The Python layout is not followed this way: the Python SDK's pop_item is
// a bare RPOP that records nothing, so a Python process that pops the item
// a cursor ends on and appends another would leave that cursor looking
// intact, and a cursor must report such a change. Nothing this package
// could add to Python's keys changes that. So in the Python layout the
// store's sessions (Store.Handle, and every session adapters.Open's store
// returns) are PythonSession values, which are no session.Follower:
// session.ReadSince takes its fallback, which reads the whole history and
// whose cursors carry the number of items read and a digest of them.
// (*Session's ItemsSince, reached through Store.Session, is that same
// fallback in the Python layout.)
//
// # Operations that land once
//
// A Session implements session.OnceAppender, in both layouts.
// AddItemsOnce records its operation id as the field o:<operation id> of
// the checkpoint hash (the value: the client's clock in the layout's
// unit), in the script that appends the batch: the id is recorded if and
// only if the batch landed, and a used id writes nothing. The checkpoint
// hash already has the lifetime operation ids need: it is in the session's
// slot, Clear and replaces keep it, every write refreshes its expiry with
// the other keys', RemoveSession deletes it and MovePrefix moves it; the
// Python SDK never touches it, and ListCheckpoints lists the v: fields
// only. A write error once the script was sent (a lost connection, a
// *ReplicaError) leaves the outcome unknown; calling again with the same
// id is safe and says which.
//
// # Lost replies
//
// Every write of a Session is sent at most once (go-redis never resends
// it: see once in scripts.go), and its error says whether it may have
// happened: an error
// wrapping session.ErrOutcomeUnknown means the command may have run (the
// connection closed or timed out while the reply was awaited, a write
// error, a reply the client could not read, a *ReplicaError); any other
// error means it did not: nothing was sent (the client was closed, no
// connection could be had from the pool or dialled) or the server
// answered with an error (WRONGTYPE, OOM, NOSCRIPT, READONLY, a script's
// own error: each script fails, if at all, before its first write), except
// an error answering a transaction's MULTI (an ACL that denies MULTI but
// not the commands after it, which then run one by one): that is
// ErrOutcomeUnknown. When in doubt it is ErrOutcomeUnknown. This holds for AddItems,
// AddItemsOnce (calling again with the same id says which), PopItem,
// Clear, ReplaceItems, ReplaceItemsIf, SaveCheckpoint,
// AppendWithCheckpoint, DeleteCheckpoint, Touch, RemoveSession,
// RecoverPop and MovePrefix.
//
// A pop whose reply is lost removed an item that nobody received, unless
// it can be asked for. So every pop carries a token the client makes
// (NewPopToken: its clock and 64 random bits), and the pop script, in the
// same atomic step as the pop, stores the item under the session's pop
// record key of that token for PopRecordTTL (ten minutes):
//
//	<prefix>:{<escaped id>}:pop:<token>                   native layout, in the session's slot
//	<prefix>:<id>:pop:<token>:messages:counter            Python layout
//
// holding "i" and the item's bytes, or "x" for a token RecoverPop settled
// as having popped nothing. A pop whose token has a record pops nothing:
// a token removes one item at most, however often its script is sent or
// arrives. PopItem returns the token in a *PopUnknownError (which wraps
// session.ErrOutcomeUnknown); RecoverPop(ctx, token) returns the item the
// pop removed or, when there is no record, writes the "x" record first
// (so that the pop, should its request still be on its way to the server,
// pops nothing) and reports that nothing was removed;
// PopItemWithToken(ctx, token) is a retry that returns the recorded item
// instead of popping another. The records cost the popped item's bytes
// for PopRecordTTL, and are never read by the Python SDK. Each session
// keeps an index of its records, a sorted set of their keys scored with
// their expiry (by the server's clock, TIME):
//
//	<prefix>:{<escaped id>}:pops                          native layout, in the session's slot
//	<prefix>:<id>:pops:messages:counter                   Python layout
//
// The script that writes a record (a pop, RecoverPop's "x") adds it to
// the index, drops the entries already expired, and sets the index's
// expiry to PopRecordTTL, so the index names at most the records of the
// last PopRecordTTL and outlives each of them. RemoveSession reads the
// index (under WATCH) and deletes the records it names, and the index, in
// the DEL that deletes the session's other keys (MULTI/EXEC; again if a
// pop changed the index meanwhile): a removed session leaves neither keys
// nor the popped items' bytes behind, at a cost that follows its records,
// never the keyspace (no SCAN). Clear and a replace with no items keep the
// records and the index, so that a pop whose reply was lost before the
// Clear can still be recovered; they expire after PopRecordTTL. The
// Python SDK's clear_session deletes its three keys only: it too leaves
// them (and the checkpoint hash) to expire. A RecoverPop after
// RemoveSession writes its "x" record (and an index) again, which expire.
// ParseKey, ListSessions and MovePrefix skip the records and the index
// (MovePrefix leaves them under the old prefix to expire), and the Python
// layout's keys (like the checkpoint hash's) are keys only of ids that
// layout refuses.
//
// # Python layout (LayoutPython)
//
// LayoutPython reads and writes what the Python Agents SDK's RedisSession
// (agents.extensions.memory.redis_session) stores on a standalone server:
//
//	<prefix>:<id>              hash: session_id, created_at (HSETNX), updated_at (Unix seconds)
//	<prefix>:<id>:messages     list of JSON strings, oldest first
//	<prefix>:<id>:counter      deleted by Clear and expired with the others, never written
//	<prefix>:<id>:checkpoints:messages:counter
//	                           this package's checkpoint hash, as in the native layout
//
// with the Python SDK's default prefix, "agents:session"
// (DefaultPythonKeyPrefix), and on every append the metadata Python
// writes (session_id and updated_at; created_at once), with the client's
// clock in seconds, as Python's time.time(). The Python SDK writes
// json.dumps(item, separators=(",", ":")); this adapter writes the item's
// bytes exactly as it has them (the round trip is byte for byte), which
// Python's json.loads reads just as well. Ids are not escaped in this
// layout (the keys must match Python's), so an id ending in ":messages"
// or ":counter", whose hash key would be another session's key, is
// refused. The checkpoint hash's key ends in ":messages:counter" for the
// same reason: it is a key only of ids the layout refuses (the hash of one
// ending in ":counter", the counter of one ending in ":messages"), so no
// accepted id reaches it, and no id is refused because of it. The layout is refused on cluster clients
// (ErrClusterLayout): its keys share no hash tag, so they live in
// different slots and no single atomic step can write them together.
//
// The Python SDK never reads, writes or deletes the checkpoint hash: its
// clear_session deletes its three keys only (as Clear does, checkpoints
// stay), and its add_items refreshes the expiry of its three keys only, so
// with a TTL a session that only Python writes keeps its checkpoints until
// the last write of this package plus the TTL.
//
// # Two layouts in one database
//
// Every Python-layout key is <prefix>:<id>[:suffix] for an arbitrary id,
// so with one prefix for both layouts a Python-layout id such as
// "{victim}:meta" names the native session "victim"'s metadata (its
// append rewrites it, its clear deletes it), and "{victim}:items" names
// its items. The two defaults are therefore distinct, and neither lies
// under the other: native keys start with "agents:native:{", Python keys
// with "agents:session:". New refuses (ErrPrefixOverlap) a native prefix
// equal to "agents:session" or under "agents:session:", and a Python
// prefix equal to "agents:native" or one that "agents:native" lies under
// ("agents"). With prefixes of your own, keep the same rule: a native
// prefix P and a Python prefix Q may share a database only when P+":"
// does not start with Q+":". An in-place migration between the layouts
// (sessionctl migrate --to '…?layout=python' on the database it reads)
// therefore writes the Python keys beside the native ones, never over
// them.
//
// Why distinct defaults rather than a refusal to mix: the Python layout's
// default must stay the Python SDK's, and the Python SDK itself writes
// any id under it without asking anyone, so only moving the native
// default out of its key space keeps a real Python process from reaching
// native keys.
//
// # Stores written with the old native default
//
// Versions before this one used "agents:session" as the native default
// too. Such a store is now refused under that prefix; move its sessions,
// every byte and expiry kept, with
//
//	moved, err := redis.MovePrefix(ctx, client, "agents:session", "")
//
// (every session's keys are renamed together, atomically, to the new
// default "agents:native"; a session whose keys were already reached by a
// Python-layout id is left in place and named in the error), or with any
// tool that renames "agents:session:{ID}:items" and
// "agents:session:{ID}:meta" to "agents:native:{ID}:...". Stop the
// writers of the old prefix first.
//
// # Corrupt records
//
// A list element that is not a JSON object is skipped by reads (it never
// hides valid items and never reduces a latest-N count), and each one is
// reported through Options.OnCorrupt with its list index ("index 3", or
// "index -2 (from the end)" for a latest-N read). PopItem never deletes
// one (its one-round-trip script keeps only records it knows the client
// reads, and puts every other newest record back, in the same atomic
// script): it pops the newest valid item, leaves the unreadable records above
// it in place byte for byte, and reports them ("index -1 (from the end),
// kept"); Python's pop_item, by contrast, removes an unreadable newest
// record and returns None.
//
// # Logging
//
// go-redis logs to the process's stderr by default (a failed dial prints
// "pool.go:770: redis: connection pool: failed to dial after 5 attempts"
// on every retry). The first Open or New routes go-redis's logger, which is
// one per process, to slog at Debug level: the same failures reach the
// caller as errors. A program that wants another logger sets it with
// goredis.SetLogger after that.
package redis
