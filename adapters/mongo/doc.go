// Package mongo stores sessions in MongoDB (go.mongodb.org/mongo-driver/v2),
// in the layout of the OpenAI Agents SDK's Python MongoDBSession, so that
// Python and Go programs can share one database. It works on a standalone
// server, a replica set and a sharded cluster, and needs neither
// transactions nor TTL indexes.
//
//	st, err := mongo.Open(ctx, "mongodb://host/agents?replicaSet=rs0", mongo.Options{})
//	s, err := st.Session("user-123")
//	err = s.AddItems(ctx, items)
//	latest, err := s.LatestItems(ctx, 50)
//
// New wraps a client the caller owns (Close leaves it connected); Open
// makes its own client, takes the database from the URI's path (else
// Options.Database, else "agents"), and disconnects it on Close. A Session
// implements session.Session, session.LatestReader, session.Replacer and
// session.Expirer.
//
// # Layout
//
// Two collections, agent_sessions and agent_messages by default:
//
//	session document  {session_id, created_at, updated_at, _seq, _generation}
//	message document  {session_id, seq, generation, message_data: [item JSON, ...], created_at}
//
// session_id is unique on the sessions collection. A message document holds
// one appended batch: message_data is the array of its items' JSON texts,
// stored byte for byte as strings (the Python SDK stores json.dumps
// strings), so one insert is the commit of a whole batch and a batch is
// atomic without a transaction. _seq on the session document counts the
// items ever reserved; an append adds its batch size to it with $inc and
// stores the resulting value, the batch's last seq, as the document's seq.
// Documents are ordered by seq, never by _id.
//
// _generation is the session's current generation; only the message
// documents of that generation are its history, and a session without a
// session document has none (every writer, the Python SDK's included,
// upserts it before inserting a batch). Indexes, created once per
// Store: {session_id} unique on sessions; {session_id, seq} (unique) and the
// Python SDK's {session_id, generation, seq} on messages.
//
// Fields this package adds, and the Python SDK ignores: _base_generation
// and _base_seq (the generation a replace installed, and its batch's seq),
// and with a TTL, expires_at on both kinds of document and
// messages_expire_at on session documents.
//
// Legacy documents written by older Python releases, one item per document
// (message_data a single string, no generation field, int32 seq), belong to
// generation 0. They are read in seq order among batches, and PopItem
// deletes such a document whole.
//
// # Operations and round trips
//
//   - AddItems: 2 round trips. findAndModify on the session document
//     ($inc _seq, upsert, returning the new document: the batch's seq and
//     the current generation), then one insert.
//   - LatestItems(n) and Items: 1 round trip for typical batch sizes: two
//     commands in flight at once, a find of the session document and a find
//     of the newest w message documents of every generation (sorted by seq,
//     limit w). w is n over a running average of items per document, with a
//     quarter to spare; if the window holds fewer than n valid items it
//     doubles. Items are taken from the newest document back, keeping only
//     the current generation's. See "Reading without a snapshot".
//   - PopItem: 2 round trips. Read the session document (the generation),
//     then one findAndModify that $pops the last element of the newest
//     non-empty document of that generation and returns the document as it
//     was. An emptied document stays as a marker. A third round trip only
//     when the session turns out to be empty.
//   - Clear: 3 round trips, 1 for a session never written. See
//     "Generations".
//   - ReplaceItems: 5 round trips. See "Generations".
//   - ExpiresIn: 1; Touch: 1 (3 when the messages' purge time must move).
//
// A batch whose document would exceed 16 MiB (the BSON limit) or
// Options.MaxBatchBytes is refused with an error wrapping
// session.ErrBatchTooLarge before any round trip.
//
// # Generations
//
// Clear, ReplaceItems and the restart of an expired session each move the
// session to a new generation with one update of its session document,
// which is their commit: every older document becomes invisible at once.
// Clear adds one to _generation (as the Python SDK's clear does). A replace
// first inserts its batch under a fresh random generation in [2^40, 2^62),
// invisible to every reader, then switches the session document to it with
// a findAndModify conditioned on the generation it started from; a lost
// switch deletes the batch and tries again (five times, then fails having
// changed nothing). A random generation is one no other writer reaches by
// counting up, so a batch left by a replace that crashed before its switch
// never becomes visible.
//
// Each transition also reserves one seq in its commit and, once committed,
// inserts a marker under that seq (a message document with an empty
// message_data), then deletes the documents below it that are not of the
// new generation. Garbage collection is best effort: documents it misses
// are invisible and the next transition deletes them.
//
// # Reading without a snapshot
//
// MongoDB gives no snapshot across the two reads (outside transactions,
// which FerretDB lacks), so a read checks that what it fetched agrees:
//
//   - A fetched document with a seq above the session document's _seq and
//     another generation means a transition may have begun after the
//     session document was read, and its collection may have removed part
//     of the history the read is about to return. Because every transition
//     writes its marker before deleting anything, a read overlapping a
//     collection always fetches such a document. The session document is
//     then read again: if the generation is unchanged the read stands, else
//     it starts over.
//   - If the current generation was installed by a replace and the window
//     reaches down to the replace's batch without holding it, the messages
//     were read before the switch; the read starts over with the two reads
//     in sequence.
//
// Both cases are rare, and both are tested by placing a clear or a replace
// exactly between a read's two fetches.
//
// # Scale-out
//
// On a replica set every read and write goes to the primary, with write
// concern majority by default (Options.WriteConcern). To shard, use
//
//	agent_sessions  shard key {session_id: 1}
//	agent_messages  shard key {session_id: 1, seq: 1}
//
// Every operation names session_id, so it targets the shards owning that
// session's range; with {session_id, seq} one session's documents sit in
// one contiguous range ordered by seq, which the latest-N sort walks
// backwards, while a session too large for one chunk can still split by
// seq. The unique indexes are compatible: each has its shard key as a
// prefix. The session document's findAndModify has the full shard key; the
// pop's findAndModify names session_id only, a prefix of the shard key,
// which MongoDB accepts as long as it targets one shard (5.0+ with
// SERVER-44422; 7.1+ in every case).
//
// # Expiry
//
// With Options.TTL, expiry has two layers:
//
//   - Logical, exact on every server: each write (append, pop, clear,
//     replace, Touch) sets the session document's expires_at to now+TTL;
//     reads do not. Reads treat a session past its expires_at as empty, so
//     its whole history vanishes at once, never in parts. The next write
//     finds the session document excluded by its filter, runs into the
//     unique index, and restarts the session under a new generation
//     (collecting the old documents), so no old item ever comes back.
//   - Physical, where the server has TTL indexes (created best effort;
//     Store.TTLIndexError says why they are missing): message documents
//     carry an expires_at at least their session's, pushed forward by the
//     writes that need it (at most once per min(TTL, 1h)/2 of activity),
//     and go when it passes; session documents go a day after their own.
//     Without TTL indexes expired documents stay until the session is
//     written again or cleared, but are never shown.
//
// A Store with a TTL starts new sessions at a random generation, so that a
// session re-created after the TTL monitor removed its session document
// never shows documents it left behind. Expiry instants are computed by
// clients: keep clocks in sync (NTP). A Store without a TTL honours an
// expiry it finds and drops it when it restarts an expired session.
//
// # The Python SDK
//
// Python and Go share a database in both directions: each reads, appends,
// pops and clears what the other wrote. The Python SDK has no TTL and no
// replace; a read racing a Python clear can see that clear's collection
// half done, since it writes no marker. Items are stored exactly as given;
// Python stores compact json.dumps output.
//
// # FerretDB
//
// The tests run against FerretDB v1.24 with its SQLite backend when no
// MongoDB is at hand. It lacks TTL indexes (expiry is then logical only),
// pipeline updates, $lookup, projections on findAndModify and $slice
// projections, none of which the package uses. It drops the connection when
// one createIndexes names several existing indexes, or when two race on a
// new collection, so indexes are made one per command, serialised in the
// process, and retried after a network error. Its updates are not atomic:
// concurrent findAndModify calls lose $inc increments and can move a
// counter backwards. The unique {session_id, seq} index turns a seq handed
// out twice into a refused insert that is retried, and each Session handle
// keeps a floor (the highest seq it has reserved or read) so that its own
// batches never land out of order; on MongoDB neither ever triggers.
// Concurrent clears or replaces of one session, and concurrent pops, are
// not safe on FerretDB v1 for the same reason; they are on MongoDB.
package mongo
