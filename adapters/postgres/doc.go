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
// To Python's index Open adds idx_agent_messages_session_id on
// (session_id, id), the one order this package reads in. CREATE INDEX
// blocks writes to the table while it runs: on a large table Python
// already fills, create it first with CREATE INDEX CONCURRENTLY (same name
// and columns), and give a role that may not create anything
// Options.SkipCreateTables.
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
// # Order
//
// Items are ordered by id alone. Python orders by (created_at, id), and
// the two agree for every history written one write after another; this
// package keeps id because created_at cannot carry an order:
// CURRENT_TIMESTAMP is the time the transaction began, so all items of a
// batch tie (only id orders them anyway), two concurrent writers can get
// start times in one order and ids in the other, and a clock stepped back
// makes later rows look older. id comes from one sequence, is unique, and,
// since every append and replace of this package holds the session row's
// lock from its first statement to its commit, grows in commit order
// within a session. It also lets latest-N and pop walk the (session_id, id) index
// from the session's newest row, in time proportional to N; Python's
// index on (session_id, created_at) would need the tie broken by a sort.
//
// Reads name the session as session_id >= $1 AND session_id <= $1 (the
// same rows as = under the column's deterministic collation) and order by
// (session_id, id): with =, the planner drops session_id from the order and
// may walk the primary key down from the table's newest row when one
// session holds much of the table, crossing every newer row of every
// other session. Only the (session_id, id) index gives this order, in
// custom and generic plans alike (TestLatestUsesIndex).
//
// # Writes and round trips
//
//	AddItems      1  upsert of the session row (creating it, or refreshing updated_at and
//	                 taking its lock) + one INSERT ... SELECT FROM unnest($2::text[]) WITH
//	                 ORDINALITY, pipelined by pgx with one Sync: one implicit transaction
//	Items         1  SELECT, oldest first
//	LatestItems   1  SELECT ... LIMIT n, newest first; only when corrupt rows leave it short
//	                 does it read again, in one REPEATABLE READ snapshot, in doubling windows
//	PopItem       1  DELETE ... RETURNING of the newest row if PostgreSQL reads it as a JSON
//	                 object (below), or "empty"; after a lost race or with a corrupt newest
//	                 row, a transaction under the session row's lock (3 or more)
//	Clear         1  lock the session row, DELETE its items, DELETE it: one implicit transaction
//	ReplaceItems  1  upsert (lock) + DELETE + INSERT: one implicit transaction
//	LoadCheckpoint / SaveCheckpoint / DeleteCheckpoint / ListCheckpoints
//	              1  one statement (a conflicting save or delete reads the stored version
//	                 for its error: 2)
//	AppendWithCheckpoint
//	              3  BEGIN + the checkpoint statement (a conflict rolls back here, nothing
//	                 written); AddItems's upsert + INSERT; COMMIT. An empty batch: 1
//
// A batch lands whole and contiguous or not at all, also with any number
// of processes writing one session: they queue on the session row's lock.
// (Python's add_items takes that lock only with its last statement, after
// inserting its items one by one, so a Python batch and a Go batch written
// at the same moment may interleave; Go batches never do.)
// A context that is already done makes every call fail with its error
// before anything is sent.
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
// limit); a row that is not JSON fails the statement and deletes nothing.
// On a server whose encoding is not UTF-8, where text may hold bytes the
// validator refuses, every pop takes the transaction, which decodes rows
// in Go before deleting. Concurrent pops of one row queue on its row lock
// and the one that finds it gone takes the transaction: every pop removes
// a different item, the newest at the time (TestPopConcurrent, with two
// pools).
//
// # Session ids
//
// Any non-empty id is valid and reaches SQL only as a bound parameter.
// PostgreSQL's text holds neither NUL bytes nor invalid UTF-8: an id with
// either, or one that starts with the reserved prefix "\x1bhex:", is
// stored as that prefix followed by its bytes in hex, a mapping that is
// one-to-one, so every id keeps a session of its own; every other id is
// stored as it is, as Python stores it. ListSessions maps stored ids back.
// An id of more than about 2700 bytes that does not compress fails with
// the server's error (a btree entry must fit a third of a page), as it
// does for Python.
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
//     after the earlier batch committed. With unique_rowid that holds only
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
//   - The index that spreads sessions. (session_id, id) keeps each session
//     contiguous, which is what latest-N wants, but in CockroachDB a range
//     split by key puts neighbouring sessions on one range; sessions named
//     by random ids (UUIDs) spread well, sequential or prefixed ids
//     ("user-1", "user-2") make one hot range. A hash-sharded index
//     (CockroachDB: USING HASH, on (session_id, id); YugabyteDB: HASH on
//     session_id, ASC on id, its default for a primary key's first column)
//     spreads sessions over nodes while keeping one session's rows in
//     order in one shard, so latest-N is still one ordered scan. The
//     primary key on id alone is the hot spot to avoid: it should become
//     (session_id, id), or a UUID, there.
package postgres
