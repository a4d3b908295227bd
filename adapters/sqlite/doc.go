// Package sqlite stores sessions in an SQLite database through the pure-Go
// driver modernc.org/sqlite (no cgo).
//
// The layout is the Python Agents SDK's SQLiteSession, table for table and
// column for column, so that Python and Go programs share one database
// file: a row per session in agent_sessions(session_id, created_at,
// updated_at), a row per item in agent_messages(id, session_id,
// message_data, created_at) with the item's exact JSON text in
// message_data, and the index idx_agent_messages_session_id on
// (session_id, id). Items are ordered by the AUTOINCREMENT id.
//
// Stores the SDK made before its 0.7 index (session_id, created_at) under
// that name; a read-write open adds agentsessions_agent_messages_session_id_id
// on (session_id, id) beside it, so that reads of the newest items stay
// O(limit), and logs that it did.
//
// A store of the SDK's AdvancedSQLiteSession (its message_structure table
// refers to the Store's messages table) is read and written as the class
// reads and writes it; see "AdvancedSQLiteSession stores" below.
//
// A Store is one database; Store.Session returns a handle on one session:
//
//	st, err := sqlite.OpenFile(ctx, "agent.db", sqlite.Options{})
//	...
//	defer st.Close()
//	s, err := st.Session("conversation-42")
//	err = s.AddItems(ctx, items)
//	recent, err := s.LatestItems(ctx, 50)
//
// # Checkpoints
//
// Sessions implement session.CheckpointStore and
// session.CheckpointCommitter: run-state checkpoints are rows of a table of
// this package's own beside Python's, agent_checkpoints
// (Options.CheckpointsTable), which the Python SDK never reads:
//
//	CREATE TABLE agent_checkpoints (
//	    session_id TEXT NOT NULL,
//	    name TEXT NOT NULL,
//	    version INTEGER NOT NULL,
//	    document BLOB NOT NULL,
//	    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
//	    PRIMARY KEY (session_id, name)
//	)
//
// Open creates it with the other tables (SkipCreateTables and ReadOnly
// create nothing: without the table a Store holds no checkpoints, and
// saves fail). A save is one statement that checks the version as it
// writes: version 0 inserts unless the row exists, version v updates the
// row whose version is v to v+1, session.AnyVersion upserts; a check that
// fails writes nothing and returns an error wrapping
// session.ErrCheckpointConflict. Saves and deletes are writes of the
// group-commit writer below, so AppendWithCheckpoint's checkpoint
// statement and its batch (the same statements as AddItems) are one
// transaction: both land or neither. Clear keeps a session's checkpoints;
// Store.RemoveSession deletes them with the rest of the session.
//
// # Following: cursors
//
// Sessions implement session.Follower. A cursor names the session (a hash
// of its id), the last readable row the reader was given and, when
// unreadable rows followed it, the last row read past:
// "s1:<hash>:<id>" or "s1:<hash>:<id>:<id>" (on an AdvancedSQLiteSession
// store, "a1:" with the rows' sequence numbers and the first row's id).
// ItemsSince is one statement, one snapshot, through the (session_id, id)
// index from the cursor's row on: the first row must be the cursor's own,
// or the history changed at or before it and ItemsSince returns
// session.ErrCursorLost. That suffices: a pop removes the newest readable
// row (Python's the newest row), a clear or a replace every row, and
// AUTOINCREMENT never hands an id out twice, so while the cursor's row is
// there no row at or before it is gone. A cursor that has seen no readable
// row has nothing to lose; another session's cursor is
// session.ErrInvalidCursor. Ids grow with every commit, Python's too, so
// a follower misses nothing appended after its cursor.
//
// # Operation ids
//
// Sessions implement session.OnceAppender. Operation ids are rows of a
// second table of this package's own, named after the messages table,
// agent_messages_operations (<MessagesTable>_operations), which the Python
// SDK never reads:
//
//	CREATE TABLE agent_messages_operations (
//	    session_id TEXT NOT NULL,
//	    operation_id TEXT NOT NULL,
//	    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
//	    PRIMARY KEY (session_id, operation_id)
//	)
//
// Open creates it as it creates the checkpoints table, and AddItemsOnce
// when it is missing; SkipCreateTables and ReadOnly create nothing, and
// AddItemsOnce then fails with ErrNoSchema (ErrReadOnly when read-only). AddItemsOnce is one write of the
// group-commit writer below: the id's INSERT ... ON CONFLICT DO NOTHING
// and, if it inserted, the batch, in one transaction, so the id is
// recorded exactly when the batch lands; a duplicate appends nothing,
// answers false and fails nothing else of its group. Clear, pops and
// replaces keep a session's ids; Store.RemoveSession deletes them. On an
// AdvancedSQLiteSession store the batch gets its structure rows, and
// following reads the handle's current branch.
//
// # AdvancedSQLiteSession stores
//
// The SDK's AdvancedSQLiteSession (agents/extensions/memory/
// advanced_sqlite_session.py; this package follows its source as of the
// v0.22 line) adds to SQLiteSession's tables: message_structure, a row per
// message of a branch (branch, session-wide sequence number, message
// type, user-turn and branch-turn numbers, tool name); turn_usage, a row
// per (branch, user turn); branch_reservations, every branch id a session
// ever used; and session_clear_generations, a counter per session that
// its clears move on. Its reads go through message_structure, and its
// pops, clears and branch deletions delete every message row of the
// session that no structure row references.
//
// On such a store (one the class made, or Store.CreateAdvancedTables) a
// Session does the same, statement for statement:
//
//   - every history write (AddItems, AddItemsOnce, AppendWithCheckpoint,
//     ReplaceItems) inserts, in the transaction of its message rows, the
//     structure rows the class's add_items computes for the same items,
//     on the handle's current branch: the class's get_items, turn
//     listings and branch calls show them, and its cleanup keeps them;
//   - Items, LatestItems, ItemsSince and HistoryVersion read the current
//     branch in sequence order;
//   - PopItem is the class's pop_item on the current branch (the
//     structure row, then the orphaned message and an emptied turn's
//     usage row), except that an unreadable newest record is left in
//     place and reported, as on every store, where the class deletes it;
//   - Clear is clear_session: every branch's rows and usage go, the
//     branch ids stay reserved and the clear generation moves on, so
//     every handle and instance on another branch goes back to main;
//   - ReplaceItems replaces the current branch alone (its rows go as
//     delete_branch deletes them); other branches and the messages they
//     share stay. Store.RemoveSession clears as Clear does and deletes
//     the checkpoints and operation ids; the reservations and the
//     generation stay, as the class keeps them.
//
// The current branch is the handle's own state, as it is an instance's
// in Python: MainBranch for a new handle (Store.Session), moved by
// SwitchBranch and CreateBranchFromTurn, and reset to MainBranch when the
// handle sees that the session was cleared since (by any Store or by the
// class). ListBranches, DeleteBranch, Turns (with the class's content
// previews), RecordUsage (store_run_usage) and TurnUsage complete the
// class's calls. On an ordinary store they fail with ErrNotAdvanced, and
// no write of this package ever adds the class's tables to one.
//
// A Store's first write transaction on such a store adds two indexes of
// this package's own to message_structure, which the class ignores:
// agentsessions_structure_branch_turn on (session_id, branch_id,
// branch_turn_number), so that an append finds the branch's turn numbers
// in O(log n) (the class's one statement scans the branch), and
// agentsessions_structure_message on message_id, which SQLite looks up
// for every message row a pop, clear or branch deletion deletes, as this
// package's connections enforce foreign keys.
//
// A Store opened on a file the class makes advanced later switches with
// its next write transaction, which sees the new tables; items written
// before have no structure rows, and the class's cleanup deletes them.
//
// # Writes: group commit
//
// Every write of a Store (AddItems, AddItemsOnce, PopItem, Clear,
// ReplaceItems, and the checkpoints' saves and deletes) goes to
// the Store's one writer, which owns its write connection and prepared
// statements. When it becomes free, the writer takes every write
// queued at that moment, begins one transaction with BEGIN IMMEDIATE, runs
// each write in turn and commits once; each caller returns after that
// commit. A batch lands whole and contiguous or not at all; a write that
// fails fails alone: PopItem runs in a SAVEPOINT of its own and is rolled
// back to it, and when any other write fails the transaction is rolled
// back and the others run again in a new one. The writer is the first
// caller that finds none running, on its own goroutine, and it never waits
// for company: a single writer's latency is one transaction's, while N
// concurrent writers share one commit (and one fsync). Store.Stats counts
// both.
//
// Writers of one Store therefore never meet SQLite's lock (never see
// SQLITE_BUSY). Writers of other Stores or processes on the same file are
// waited for: the writer retries BEGIN IMMEDIATE with short jittered
// pauses (at most 8 ms apart, so that it finds the gaps between another
// busy writer's transactions) for up to Options.BusyTimeout since each
// write was queued; only then does that write fail, with an error that
// wraps SQLite's BUSY, and nothing of it was written.
//
// # Durability: Options.Synchronous
//
// Open sets WAL journal mode (readers never wait for writers), foreign
// keys, the busy timeout and PRAGMA synchronous on every connection. The
// default, SyncFull, syncs the write-ahead log at every commit: a write
// AddItems returned nil for survives a power loss. SyncNormal syncs only
// at checkpoints: a committed write survives the process crashing, but a
// power loss or operating-system crash may roll back the last commits
// (the file stays consistent). With group commit, concurrent writers share
// FULL's fsync, which narrows the gap between the two.
//
// # Unreadable records
//
// A stored row whose message_data is not a JSON object is skipped by
// reads and reported through Options.OnCorrupt with Position "id=<rowid>"
// and its raw bytes. It is never deleted: PopItem passes over it (it
// deletes the newest readable row in one statement, and if that statement
// took an unreadable one, rolls it back in the same transaction and walks
// down instead), and reports it.
//
// # Read-only
//
// Options.ReadOnly opens the file with mode=ro: nothing is created, a
// missing file or missing tables is an error, and every write fails with
// ErrReadOnly.
//
// A context that is already done makes every call fail with its error
// before anything is written. A context that ends while its write waits
// (in the queue, or for another process's lock) withdraws the write:
// nothing is written and the call returns the context's error. Once the
// writer has taken a write, the caller waits for its commit and gets that
// outcome: a write the caller is told failed was not done, in whole or in
// part.
package sqlite
