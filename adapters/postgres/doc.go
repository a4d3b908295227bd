// Package postgres stores sessions in PostgreSQL through pgx
// (github.com/jackc/pgx/v5 and its pool, pgxpool), with the Python Agents
// SDK's SQLAlchemySession layout, so that Python and Go programs share one
// database.
//
//	st, err := postgres.Open(ctx, "postgres://app@db/agents", postgres.Options{})
//	...
//	defer st.Close()
//	s, err := st.Session("conversation-42")
//	err = s.AddItems(ctx, items)
//	recent, err := s.LatestItems(ctx, 50)
//
// Programs that open stores by URL import the package (or adapters/all)
// and open postgres:// or postgresql:// URLs with package adapters; the
// options schema, sessions_table, messages_table and checkpoints_table are
// the adapter's, every other one is pgx's (sslmode, pool_max_conns, ...).
//
// # Layout
//
// The tables are what SQLAlchemy's create_all makes for SQLAlchemySession
// (src/agents/extensions/memory/sqlalchemy_session.py): a row per session
// in agent_sessions(session_id VARCHAR primary key, created_at,
// updated_at TIMESTAMP with CURRENT_TIMESTAMP defaults), a row per item in
// agent_messages(id primary key, session_id VARCHAR NOT NULL REFERENCES
// agent_sessions ON DELETE CASCADE, message_data TEXT NOT NULL, created_at
// TIMESTAMP) with the item's exact JSON text in message_data, and Python's
// index idx_agent_messages_session_time on (session_id, created_at). Table
// names are configurable (Options) and validated as identifiers; Options.Schema
// qualifies them. Open creates what is missing unless
// Options.SkipCreateTables is set; tables Python made are used as they are
// (their id is SERIAL, int4; tables Open makes use BIGSERIAL, the same
// values without the 2^31 limit).
//
// To Python's index Open adds idx_agent_messages_time_id on
// (session_id, created_at, id), the order every read walks (below), if it
// is missing; if it cannot (a role that may not create indexes), Open
// logs a warning and reads sort instead. CREATE INDEX blocks writes to the
// table while it runs: on a large table Python already fills, or one an
// older version of this package made, create it first with CREATE INDEX
// CONCURRENTLY (same name and columns), and give a role that may not
// create anything Options.SkipCreateTables. Older versions created
// idx_agent_messages_session_id on (session_id, id); nothing reads it
// any more, and it may be dropped.
//
// # Checkpoints
//
// Sessions implement session.CheckpointStore and
// session.CheckpointCommitter: run-state checkpoints are rows of a table
// of this package's own beside Python's, in the same schema,
// agent_checkpoints (Options.CheckpointsTable), which the Python SDK never
// reads:
//
//	CREATE TABLE agent_checkpoints (
//		session_id VARCHAR NOT NULL,
//		name TEXT NOT NULL,
//		version BIGINT NOT NULL,
//		document BYTEA NOT NULL,
//		updated_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
//		PRIMARY KEY (session_id, name)
//	)
//
// Open creates it with the other tables; where they exist already and the
// role may not create it, Open still succeeds and the first save reports
// why it cannot (SkipCreateTables creates nothing: without the table a
// Store holds no checkpoints, and saves fail with ErrNoSchema). session_id
// and name are stored as session ids are (below). A save is one statement
// that checks the version as it writes, under READ COMMITTED: version 0 is
// INSERT ... ON CONFLICT DO NOTHING, version v is UPDATE ... WHERE version
// = v (a concurrent save of the row is waited for, and its committed
// version checked), session.AnyVersion an upsert; each RETURNING the new
// version, and no row back is session.ErrCheckpointConflict with nothing
// written. Clear keeps a session's checkpoints; Store.RemoveSession
// deletes them with the rest of the session.
//
// # Following: cursors
//
// Sessions implement session.Follower. A cursor names the session (a hash
// of its stored id), the last valid row the reader was given and the last
// row it read past (the same row unless corrupt rows followed it), each as
// its id and its created_at to the microsecond:
// "p1:<hash>:<id>,<created_at>,<id>,<created_at>", created_at written as
// 2006-01-02T15:04:05.000000 whatever the connection's DateStyle.
// ItemsSince is one statement per 1000 rows, walking the (session_id,
// created_at, id) index in Items' order from the cursor's row on
// ((session_id, created_at, id) >= (...) under a LIMIT, so that custom and
// generic plans both walk the index and never sort): the first row must be
// the cursor's own, or the history changed at or before the cursor and
// ItemsSince returns session.ErrCursorLost. That suffices: a pop removes
// the newest valid row (Python's the newest row), a clear or a replace
// every row, and ids are never reused, so while the cursor's row is there
// no row at or before it is gone. A cursor that has seen no valid row (the
// zero cursor, or a history of corrupt rows) has nothing to lose. Another
// session's cursor is session.ErrInvalidCursor.
//
// What a follower is given is every row that sorts after its cursor. A Go
// batch always does: its created_at is later than every row of the
// session committed before it, under the session lock (see Order), so the
// first ItemsSince after its commit returns it, whole. A Python batch does
// not always: its created_at is its transaction's start, and one that
// commits after a follower has read past that time sorts before the
// cursor. Beside Python writers a follower may therefore miss a Python
// batch (it is in Items, and in a read from the zero cursor); it never
// misses a Go batch, and never reads an item twice.
//
// # Operation ids
//
// Sessions implement session.OnceAppender. Operation ids are rows of a
// second table of this package's own, named after the messages table,
// agent_messages_operations (<MessagesTable>_operations, in Options.Schema),
// which the Python SDK never reads:
//
//	CREATE TABLE agent_messages_operations (
//		session_id VARCHAR NOT NULL,
//		operation_id TEXT NOT NULL,
//		created_at TIMESTAMP WITHOUT TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL,
//		PRIMARY KEY (session_id, operation_id)
//	)
//
// Open creates it as it creates the checkpoints table (and, failing that,
// the first AddItemsOnce tries; with SkipCreateTables it must exist).
// session_id and operation_id are stored as session ids are. AddItemsOnce
// is AddItems's round trip with one statement in place of the upsert and
// insert: it inserts the id ON CONFLICT DO NOTHING and, only if it did,
// the session row and the batch, after the advisory lock and FOR UPDATE;
// so the id is recorded exactly when the batch lands, and a second call
// with the id waits for the first to commit and appends nothing. Its
// error wraps session.ErrOutcomeUnknown as AddItems's does, and calling
// again with the same id is then safe. Clear, pops and replaces keep a
// session's ids; Store.RemoveSession deletes them.
//
// # Order
//
// Every read, latest-N and pop orders by (created_at, id), as
// SQLAlchemySession's get_items and pop_item do, so that Go and Python
// read one history in one order. Python's rows take created_at from
// CURRENT_TIMESTAMP, the start of their transaction: a Python batch shares
// one value. A Go batch shares one value too, set under the session row's
// lock: greatest(clock_timestamp(), the session's newest created_at + 1
// microsecond), so it sorts after every row committed before it even if
// its transaction waited on the lock, or the clock stepped back. The
// value is cast to TIMESTAMP in the connection's TimeZone, as Python's
// CURRENT_TIMESTAMP is: connections with different TimeZone settings
// disagree about created_at (Python's with each other, too).
//
// The session lock. Every write of this package (and every pop) first
// takes a transaction-scoped advisory lock on a hash of the messages
// table and the session id, which exists whether or not the session row
// does, so that Go writers queue even on a session being created or
// cleared, and then locks the session row FOR UPDATE.
//
// What holds beside Python writers. Python's add_items takes no lock of its own until its
// last statement (UPDATE updated_at), but each of its inserts checks the
// foreign key, which holds FOR KEY SHARE on the session row until its
// commit; FOR UPDATE conflicts with that. So a Go write waits for every
// Python batch that has inserted a row, and a Python batch that has not
// yet inserted waits at its first insert for the Go write to commit: a Go
// batch and a Python batch never insert at the same time (except on a
// session whose row a Python batch creates while the Go write runs: the
// Go write then takes the row's lock with its upsert, after that batch
// committed, in a weaker mode that lets later Python inserts run beside
// it). Hence:
//
//   - Go batches are whole and contiguous, and sort after every batch
//     committed before them. A Python batch whose transaction began
//     earlier and that committed later sorts before the Go batch (its
//     CURRENT_TIMESTAMP is older): Python's appends do not always land at
//     the end, for Python readers as for Go's.
//   - A Python batch and a Go batch with the same created_at, to the
//     microsecond (it happens: TestOrderBesidePython sees a few in a
//     thousand Go batches), are still each contiguous: their ids, which break
//     the tie, were drawn one batch after the other.
//   - Two Python batches with the same CURRENT_TIMESTAMP that insert at
//     the same time interleave, by id; Python's own problem, which no
//     lock of this package can prevent (TestOrderBesidePython has not
//     seen it in 20 runs of 120 batches per writer).
//
// A Go pop or clear and Python's clear_session at the same moment may
// deadlock (Python deletes the items, then the session row the Go call
// holds; the Go call waits for an item Python deleted): PostgreSQL aborts
// one of them with SQLSTATE 40P01 after deadlock_timeout, and the aborted
// one wrote nothing.
//
// An existing store (Python's, or one an older version of this package
// wrote) reads as it is: its rows have created_at from CURRENT_TIMESTAMP.
// Within a batch they tie and id orders them, as before. Between batches
// of older Go writers, the (created_at, id) order is the id order except
// where a batch's transaction began before a batch that committed ahead
// of it (an AppendWithCheckpoint waiting on the session lock, or a clock
// step): those two batches, each whole, change places. Open creates the
// new index (above).
//
// Reads name the session as session_id >= $1 AND session_id <= $1 (the
// same rows as = under the column's deterministic collation) and order by
// (session_id, created_at, id): with =, the planner may drop session_id
// from the order and walk another index, filtering, when one session holds
// much of the table. Only the (session_id, created_at, id) index gives
// this order, so latest-N and pop walk it backwards from the session's
// newest row in time proportional to N, in custom and generic plans alike
// (TestLatestUsesIndex); Python's index on (session_id, created_at) would
// need the tie broken by a sort. A window below the first (corrupt rows
// among the newest) starts below the last (created_at, id) read.
//
// # Writes and round trips
//
//	AddItems      1  the advisory lock + SELECT ... FOR UPDATE of the session row + its upsert (creating it, or
//	                 refreshing updated_at) + one INSERT ... SELECT FROM unnest($2::text[])
//	                 WITH ORDINALITY, pipelined by pgx with one Sync: one implicit transaction
//	Items         1  SELECT, oldest first
//	LatestItems   1  SELECT ... LIMIT n, newest first; only when corrupt rows leave it short
//	                 does it read again, in one REPEATABLE READ snapshot, in doubling windows
//	PopItem       1  the advisory lock and the session row's FOR UPDATE in one statement
//	                 + DELETE ... RETURNING of the newest row if PostgreSQL reads it as a
//	                 JSON object (below): one implicit transaction. Deleting nothing, it is
//	                 empty if there was no session row, or if a read after it finds no rows
//	                 (2); after a race lost to Python's pop or with a corrupt newest row, a
//	                 transaction under the session row's lock (3 or more)
//	Clear         1  lock the session row, DELETE its items, DELETE it: one implicit transaction
//	ReplaceItems  1  lock + upsert + DELETE + INSERT: one implicit transaction
//	HistoryVersion
//	              1  SELECT count(*) and md5 of the ids and xmins
//	ReplaceItemsIf
//	              2  BEGIN + lock + upsert + DELETE ... RETURNING the version of what it
//	                 deleted; then INSERT + COMMIT, or ROLLBACK (session.ErrHistoryChanged)
//	LoadCheckpoint / SaveCheckpoint / DeleteCheckpoint / ListCheckpoints
//	              1  one statement (a conflicting save or delete reads the stored version
//	                 for its error: 2)
//	AppendWithCheckpoint
//	              1  the checkpoint statement (a version conflict fails it, which rolls the
//	                 implicit transaction back: nothing written) + AddItems's lock + upsert +
//	                 INSERT, pipelined with one Sync. An empty batch: 1
//
// A batch lands whole and contiguous or not at all, also with any number
// of processes writing one session: they queue on the session lock, and
// Python's batches wait for it or it for them (above).
// A context that is already done makes every call fail with its error
// before anything is sent.
//
// Every read is one statement (one snapshot), or, for latest-N past
// corrupt rows, one REPEATABLE READ transaction; every write takes the
// session lock first and runs each later statement, under READ
// COMMITTED, with a snapshot taken once it holds the lock. So reads,
// appends, pops, clears and replaces of this package are linearizable
// (TestPopLinearizable, TestMixedLinearizable).
//
// # Outcome unknown
//
// A write's error wraps session.ErrOutcomeUnknown when the write may have
// been committed: its commit had been sent when the deadline passed or
// the connection failed, and no answer came back. For the one-round-trip
// writes (AddItems, AppendWithCheckpoint, ReplaceItems, Clear, PopItem's
// common case and a lone checkpoint save) the commit travels with the
// statements, in the pipeline's Sync, so that is any such error once the
// batch was sent, even while it waits on a lock: PostgreSQL goes on with
// what it received (pgx sends a cancel request as it gives up, which
// usually, not always, arrives before the commit). For the writes with an
// explicit transaction (ReplaceItemsIf, PopItem's slow path) it is an
// error of the COMMIT itself; an error before it means nothing was written
// (a context that ends before the COMMIT is sent rolls back). An error
// PostgreSQL reported (the statement or the commit failed) and every
// error before anything was sent never wraps it: nothing was written.
// Read the session before writing again after ErrOutcomeUnknown.
//
// # Pop and corrupt rows
//
// A stored row whose message_data is not a JSON object is skipped by
// reads (it never hides a valid item, and latest-N counts valid items
// only) and reported through Options.OnCorrupt with Position "id=<id>" and
// its raw bytes. It is never deleted by PopItem: a pop goes past corrupt
// rows at the top of the session to the newest valid item, deletes only
// that one, and reports the rows it went past, which stay. (Python's pop
// deletes them; Go's leaves them for a person, or sessionctl repair, to
// look at.) Clear and ReplaceItems delete every row, as asked.
//
// The one-statement pop deletes the newest row only if PostgreSQL's JSON
// parser, which is strict RFC 8259 as this module's validator is, reads it
// as an object holding at most 10000 brackets (the validator's depth
// limit), a filter on the one row the primary key finds for the newest
// id; a row that is not JSON fails the statement and deletes nothing.
// On a server whose encoding is not UTF-8, where text may hold bytes the
// validator refuses, every pop takes the transaction, which decodes rows
// in Go before deleting. Concurrent pops of this package queue on the
// session lock; a Python pop, which takes no session lock, may take
// the row first, and the pop that finds it gone takes the transaction:
// every pop removes a different item, the newest at the time
// (TestPopConcurrent with two pools, TestPythonConcurrentPops).
//
// # Session ids
//
// Any non-empty id is valid and reaches SQL only as a bound parameter.
// PostgreSQL's text holds neither NUL bytes nor invalid UTF-8: an id with
// either, or one that starts with the reserved prefix "\x1bhex:", is
// stored as that prefix followed by its bytes in hex, a mapping that is
// one-to-one, so every id keeps a session of its own; every other id is
// stored as it is, as Python stores it. ListSessions maps stored ids back.
// A btree entry holds at most 2704 bytes: a write under an id longer than
// that once PostgreSQL has compressed it (about 2670 bytes, for an id that
// does not compress) is refused by the server before anything is written,
// and fails with an *IDTooLongError naming the session (quoted, cut
// short) and the limit, wrapping session.ErrInvalidSessionID. Reads of
// such an id find nothing. Python's writes fail alike, with the server's
// error.
//
// # No TTL
//
// PostgreSQL has no expiry of its own: a TTL would need a sweeper this
// package cannot guarantee runs, so the Store does not declare the TTL
// capability.
//
// # Scale-out on paper: CockroachDB and YugabyteDB
//
// Both speak the PostgreSQL wire protocol and run this package's
// statements; what changes is what is cheap.
//
//   - Ids. A SERIAL/BIGSERIAL column draws from a sequence, which on a
//     distributed engine is one hot range (CockroachDB) or a cached,
//     per-node block of values (YugabyteDB: ids grow per node, not
//     globally). CockroachDB's default for SERIAL is unique_rowid(): unique,
//     roughly time-ordered, but not in commit order across nodes. Either
//     way ids stay ordered within a session as long as the session's
//     writers queue on the session row's lock, as this package's do: the
//     id is drawn after the lock is taken, so a later batch's ids are drawn
//     after the earlier batch committed (and created_at, which orders
//     first, is set under that lock too). With unique_rowid that holds only
//     as far as the nodes' clocks agree (CockroachDB bounds the skew at
//     500 ms), so a deployment should keep a session's writers on one
//     gateway or use a per-session counter column (seq = max(seq)+1 under
//     the lock) instead of a global id.
//   - Retries. CockroachDB runs SERIALIZABLE, YugabyteDB snapshot
//     isolation by default; both abort conflicting transactions with
//     SQLSTATE 40001, which the client must retry. Every write of this package is
//     one implicit transaction sent in one round trip (pop's slow path
//     aside), so a retry resends the whole batch, and a batch that failed
//     with 40001 wrote nothing; a retry loop around AddItems, ReplaceItems,
//     Clear and PopItem on 40001 is safe. This package does not retry by
//     itself: on PostgreSQL, under READ COMMITTED, 40001 does not happen.
//   - The index that spreads sessions. (session_id, created_at, id) keeps each session
//     contiguous, which is what latest-N wants, but in CockroachDB a range
//     split by key puts neighbouring sessions on one range; sessions named
//     by random ids (UUIDs) spread well, sequential or prefixed ids
//     ("user-1", "user-2") make one hot range. A hash-sharded index
//     (CockroachDB: USING HASH, on (session_id, created_at, id); YugabyteDB:
//     HASH on session_id, ASC on the rest, its default for a primary key's first column)
//     spreads sessions over nodes while keeping one session's rows in
//     order in one shard, so latest-N is still one ordered scan. The
//     primary key on id alone is the hot spot to avoid: it should become
//     (session_id, id), or a UUID, there.
package postgres
