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
// A Store is one database; Store.Session returns a handle on one session:
//
//	st, err := sqlite.Open(ctx, "agent.db", sqlite.Options{})
//	...
//	defer st.Close()
//	s, err := st.Session("conversation-42")
//	err = s.AddItems(ctx, items)
//	recent, err := s.LatestItems(ctx, 50)
//
// Every write is one transaction begun with BEGIN IMMEDIATE, so that
// writers queue for the database lock instead of deadlocking on a lock
// upgrade; a batch lands whole and contiguous or not at all, also with
// several processes on one file. Open sets WAL journal mode (readers never
// wait for writers), foreign keys and a busy timeout on every connection.
//
// A stored row whose message_data is not a JSON object is skipped by
// reads and deleted by PopItem, and each one is reported through
// Options.OnCorrupt with Position "id=<rowid>" and its raw bytes.
//
// A context that is already done makes every call fail with its error
// before anything is written. A context that ends during a write rolls it
// back, unless every statement already ran: then COMMIT runs anyway and
// the caller gets its outcome, so a write the caller is told failed was
// not half done.
package sqlite
