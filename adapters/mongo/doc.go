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
// implements session.Session, session.LatestReader, session.Replacer,
// session.VersionedReplacer, session.Expirer, session.CheckpointStore,
// session.Follower and session.OnceAppender (not
// session.CheckpointCommitter: an append and a checkpoint save are two
// documents, and FerretDB has no multi-document transactions).
//
// # Layout
//
// Two collections, agent_sessions and agent_messages by default, and two
// of this package's own, agent_checkpoints (see "Checkpoints") and
// agent_operations (see "Operation ids"):
//
//	session document     {session_id, created_at, updated_at, _seq, _generation, _top, _resv, _abandoned, _pops, _popping, _ops, _ops_moved}
//	message document     {session_id, seq, generation, message_data: [item JSON, ...], created_at, _c}
//	checkpoint document  {_id: "<len(id)>:<id>:<name>:<version>", session_id, name, version, document (binary), updated_at}
//	operation document   {_id: "<len(id)>:<id>:<operation id>", session_id, operation_id, created_at}
//
// session_id is unique on the sessions collection. A message document holds
// one appended batch: message_data is the array of its items' JSON texts,
// stored byte for byte as strings (the Python SDK stores json.dumps
// strings), so one insert is the commit of a whole batch and a batch is
// atomic without a transaction. _seq on the session document counts the
// seqs ever reserved; an append adds its batch size n to it with $inc and,
// exactly as the Python SDK's MongoDBSession, stores the resulting value
// minus one as the document's seq: the 0-based position of the batch's
// last item. The batch occupies positions [_seq-n, _seq-1], so every
// writer, of either language, holds a range no other writer holds, and the
// next batch starts where the last one ended. Documents are ordered by seq
// (ascending for a full read, descending with a limit for latest-N, the
// Python SDK's sorts), never by _id.
//
// _generation is the session's current generation; only the message
// documents of that generation are its history, and a session without a
// session document has none (every writer, the Python SDK's included,
// upserts it before inserting a batch). Indexes, created once per
// Store: {session_id} unique on sessions, {session_id} on operations; on messages, {session_id, seq}
// and the Python SDK's {session_id, generation, seq}, neither unique, as
// the SDK's are: a unique message index would make a Python write fail
// wherever two documents share a seq (data numbered by an older release of
// this package, which stored a batch one seq higher, or a $inc lost by
// FerretDB). An older release of this package made {session_id, seq}
// unique; the first use of a Store replaces that index by a plain one (an
// index holds no data; nothing is lost). Two documents sharing a seq are
// returned in the server's index order: on MongoDB both languages agree on
// it; FerretDB sorts in memory, and the two languages may order such a pair
// differently there (only a Python write right after data of an older
// release, or a $inc FerretDB lost, makes one; a Go write after a Go read
// never does, see guard "lost $inc").
//
// Fields this package adds, and the Python SDK ignores: _base_generation
// and _base_seq (the generation a replace installed, and its batch's seq),
// _top, _resv, _abandoned, _pops and _popping on session documents and _c
// on an append's message document (see "Linearizability"), _ops and
// _ops_moved on session documents (see "Operation ids"),
// and with a TTL, expires_at on both kinds of document, and
// messages_expire_at, _purge_by and _expired_through on session documents
// (see "Expiry").
//
// Session ids are strings, and BSON strings are UTF-8: an id that is not
// valid UTF-8 is refused with an error wrapping session.ErrInvalidSessionID
// (the driver would store it altered, so that "\xff\xfe" and "\xfe\xff"
// would share one session). MongoDB stores any other id, NUL and a
// megabyte included. A server that cannot store one answers with an
// error: FerretDB on PostgreSQL refuses an id or checkpoint name holding
// NUL (its jsonb has no \u0000, so even a read of such a session fails)
// and an index entry over some 2.7 kB after compression; such a refusal
// is returned wrapping session.ErrInvalidSessionID, and nothing was
// written. Only a server's error reply naming that refusal, for an id (or
// id and checkpoint name) that holds NUL or is at least 2 kB long, is so
// classified: a network error stays what it is (a lost commit reply
// session.ErrOutcomeUnknown).
//
// Legacy documents written by older Python releases, one item per document
// (message_data a single string, no generation field, int32 seq), belong to
// generation 0. They are read in seq order among batches, and PopItem
// deletes such a document whole.
//
// # Operations and round trips
//
//   - AddItems: 3 round trips. findAndModify on the session document
//     ($inc _seq, upsert, returning the new document: the batch's seq and
//     the current generation), the insert of the batch (hidden until
//     committed), and its commit on the session document, which waits for
//     the appends reserved before it. See "Linearizability".
//   - LatestItems(n) and Items: 2 round trips for typical batch sizes: a
//     find of the session document, then a find of the newest w message
//     documents of every generation (sorted by seq, limit w), in that
//     order. w is n over a running average of items per document, with a
//     quarter to spare; if the window holds fewer than n valid items it
//     doubles. Items are taken from the newest document back, keeping only
//     the current generation's committed ones. See "Reading without a
//     snapshot".
//   - PopItem: 4 round trips (the first is a findAndModify that refreshes
//     the expiry, with a TTL). Read the session document, then the newest
//     non-empty documents; commit the pop of exactly the newest readable
//     record on the session document (see "Linearizability"); then one
//     update that removes it, conditioned on the document being as read
//     ($pop of the last element when the array still has the length read
//     and that element; a $set of the array without the record when
//     unreadable records sit above it: they are reported and kept byte
//     for byte). An emptied document stays as a marker. A lost commit (a
//     concurrent append or pop) reads again.
//   - ItemsSince: 2 round trips, a read of the session document, then a
//     find of the message documents from the cursor's on, with a count of
//     those up to the cursor in flight beside it (see "Following").
//   - AddItemsOnce: AddItems's 3 round trips, then the insert of the id's
//     decision (4); the look-up of the id, the move of the ids recorded
//     before it and the insert of the id's claim run beside the batch's
//     insert. With no items, 5 (reserve no seq, look up, claim, record,
//     decide). A used id costs the reservation (and, once moved, the
//     look-up). See "Operation ids".
//   - HistoryVersion: 1 round trip; ReplaceItemsIf: ReplaceItems plus one
//     read (see "Versions").
//   - Clear: 3 round trips, 1 for a session never written (2 with a TTL).
//     See "Generations".
//   - ReplaceItems: 5 round trips. See "Generations".
//   - ExpiresIn: 1 (2 when the session document is missing or expired:
//     the checkpoints' expiry then says); Touch: 1 (3 when the messages'
//     purge time must move).
//   - SaveCheckpoint from a version: 4 round trips (insert, check, commit,
//     deletion of the old version); from 0 or AnyVersion, 5 (a read of the
//     newest version first); with a TTL, 1 or 2 more to restart the
//     session's expiry. DeleteCheckpoint: the same, without the expiry.
//     LoadCheckpoint and ListCheckpoints: 1 (2 when a checkpoint's own
//     expiry has passed). See "Checkpoints".
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
// inserts a marker at that seq (_seq minus one, numbered as a batch; a
// message document with an empty message_data), then deletes the
// documents below it that are not of the new generation. The Python SDK's
// clear does the same without a marker, and its pop deletes markers. Garbage collection is best effort: documents it misses
// are invisible and the next transition deletes them.
//
// # Reading without a snapshot
//
// MongoDB gives no snapshot across the two reads (outside transactions,
// which FerretDB lacks). The session document is read first, then the
// messages (a batch is visible once its commit on the session document is,
// so the messages must be read after it), and a read checks that what it
// fetched agrees:
//
//   - A fetched document with a seq at or above the session document's
//     _seq (a position no reservation it saw handed out) and another
//     generation means a transition may have begun after the
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
// # Linearizability
//
// The Python SDK's numbering is kept: an append reserves its seqs with
// $inc on _seq and stores the batch at _seq minus one. A reservation and
// an insert are two round trips, so by themselves a batch reserved first
// and inserted second would appear below one a reader had already seen as
// the newest (Items [x0 b], then [x0 a b]). Appends of this package
// therefore become visible at a commit, one update of the session
// document, in seq order:
//
//  1. reserve the seqs (as the Python SDK does), listing the reservation,
//     under the batch's future _id, in _resv;
//  2. insert the batch with _c: 1; no reader shows it yet;
//  3. commit: set _top to the batch's seq and drop the reservation from
//     _resv, only if the generation is still the reservation's, _top is
//     below the seq (no batch reserved later was committed first), the
//     reservation is still listed, and the appends that were listed when
//     it was made are not any more (they committed or gave up). An append
//     waits for those up to 2 seconds, then commits anyway and moves the
//     ones still listed to _abandoned in the same update (their writers
//     most likely died between reservation and commit). A lost commit
//     deletes the batch, drops the reservation and goes back to 1, so the
//     batch lands above whatever a reader may have seen; the seqs it
//     reserved stay unused (the Python SDK reads by seq and minds no gap).
//
// Within one Store, the appends to one session run one at a time (each
// would wait for the commits of those reserved before it anyway, and a
// wait in the process costs no round trip); across Stores and processes
// they run concurrently and wait for each other as above.
//
// A read takes the session document, then the messages, and shows a
// document with _c only when it is committed as of that session document:
// its seq is at or below _top and its _id is neither in _resv nor in
// _abandoned (a batch committed after the session document was read has a
// seq above its _top: it is newer than the read). Documents without _c
// (the Python SDK's, a replace's batch, markers) are shown as before. So an
// append is visible to every read that begins after its commit, in seq
// order, and never appears below an item already read; an append whose
// commit failed was never acknowledged and was never shown. A writer that
// dies between steps 1 and 3 leaves a reservation that holds the appends
// reserved after it for at most 2 seconds, is abandoned by the next append
// once 30 seconds old, and a batch nobody ever shows (the next
// transition's garbage collection deletes it; a Python reader shows it
// meanwhile). Nothing blocks a reader, and an acknowledged item never
// disappears: a reservation is abandoned only while it is still listed,
// that is, uncommitted.
//
// A pop is committed the same way: after reading the session document
// and the newest documents, it records its choice (_popping: document,
// record index, record count, generation) and adds one to _pops, only if
// the generation, _top and _pops are as read; then it removes the record
// from its document. A read that finds _popping hides that record while
// the document still holds as many records as the pop saw, and the next
// pop first applies the last one (conditionally: applying twice does
// nothing), so a pop whose process died in between is completed. Two pops
// never take the same record, and a pop takes the newest record at its
// commit. Transitions (clear, replace) commit on the session document
// already, and drop _resv, _abandoned and _popping, which concern the old
// generation.
//
// A commit that fails with a network error or a timeout (the update may
// have been applied and its reply lost), a cancelled context or a write
// concern error makes the call's error wrap session.ErrOutcomeUnknown: the
// append, pop or clear may or may not have happened. Other failures (the
// server's refusal, or any step before the commit) mean it did not.
//
// This holds between writers of this package. The Python SDK's appends and
// pops write the message documents directly: a Python batch is visible at
// its insert (so two concurrent Python appends can still show the old
// inversion), and a Python pop racing a Go pop may take a record Go has
// already committed. Both remain safe in the sense that nothing is lost or
// duplicated by Go's writes.
//
// # Following
//
// A cursor of ItemsSince names the message document holding the last item
// the reader was given, with how many records the reader saw in it, and
// the generation. ItemsSince reads the session document, then the
// documents from that one on, and reports the cursor lost unless that
// document is still visible in the current generation with as many
// records: appends never add to a document, and a pop takes the newest
// readable record, so a pop of an item the reader was given shrinks it;
// a clear, a replace or an expiry restart moves the generation or hides
// it. A batch can still become visible below a cursor: a Python batch at
// its insert below one already read, a batch of this package at its
// commit below a Python batch already read. The cursor therefore also
// holds how many documents with a record the reader saw up to its last
// one, and ItemsSince counts them again (one more command, sent beside
// the find): a different count reports the cursor lost, and the reader
// starts over, rather than missing the batch. See follow.go.
//
// # Operation ids
//
// AddItemsOnce records its operation id in its batch's commit (the update
// of the session document that makes the batch visible): _ops.<hash of
// the id> is set to the id, on condition that it is not set yet, so the
// id is recorded if and only if the batch is. So that session documents
// stay small, the next AddItemsOnce of the session moves recorded ids to
// the agent_operations collection (Options.OperationsCollection; the
// Python SDK never reads it): it inserts their documents (unique _id)
// beside its batch's insert, and its commit removes them from _ops and
// adds one to _ops_moved, on condition that _ops_moved is as its
// reservation read it. An id is recorded while it is in _ops or has its
// document. Clear, PopItem, replaces and expiry restarts keep both;
// RemoveSession deletes both. See once.go.
//
// Which of two concurrent calls with one id answers true is decided by
// inserts with a unique _id in the operations collection, not by the
// commit's condition alone (which decides only where single-document
// updates are atomic): before its commit a call inserts the id's claim,
// and only the call whose claim got in commits (the other deletes its
// batch and waits until the id is recorded, or the holder's reservation
// is gone or 2 seconds old, and tries again); after its commit it inserts
// the id's decision, and answers true only if that got in. So exactly one
// of two concurrent calls answers true on every server that enforces a
// unique _id: on FerretDB behind the tests' write serializer and on
// FerretDB directly (TestAppendOnceConcurrent: 0 double answers in 36
// pairs of each, with and without items). Directly on FerretDB the batch
// itself can still be kept twice (8 of 36 pairs there): its commits are
// not atomic. On MongoDB the second commit never applies and the
// decision costs one round trip. See "Claims" in once.go, and
// docs/reliability.md, "Mongo claims: verified where, or resting on
// what", for which of this package's guarantees were checked on which
// server and which rest on MongoDB's documented single-document
// atomicity and unique indexes.
//
// # Versions
//
// HistoryVersion reads the session document and returns
// "mongo1:GEN:SEQ:TOP:POPS:EXPIRED" (all 0 without one): every append
// (reservation and commit), pop, clear, replace and expiry restart of this
// package moves one of them, and so do the Python SDK's appends and
// clears, and none ever comes back (_seq, _top and _pops only grow, and
// every transition reserves a seq). A Python pop moves none: it writes
// only a message document. ReplaceItemsIf checks the version, then runs a
// replace whose commit (the switch of the generation) is conditioned on
// _seq, _top, _pops and _expired_through being as its own reservation left
// them, so an append, pop or transition landing in between makes it fail
// with session.ErrHistoryChanged; the lost batch is deleted and no item is
// written.
//
// # Servers and their guarantees
//
// No MongoDB runs on the machine the tests are developed on: the
// concurrency guarantees below were checked on FerretDB v1.24.2 made
// atomic per document by a write serializer, and on MongoDB they rest on
// its documented single-document atomicity and unique indexes. The table
// "Mongo claims: verified where, or resting on what" in
// docs/reliability.md lists each guarantee with where it was checked.
//
//   - MongoDB (standalone, replica set, sharded cluster): single-document
//     updates are atomic, so every commit above is, and the guarantees of
//     "Linearizability" hold, with write concern majority (the default)
//     also across a primary failover. Supported.
//   - FerretDB v1 with its PostgreSQL backend: NOT atomic by itself.
//     FerretDB v1 runs an update or findAndModify as a read, an update
//     applied in Go, and a write by _id, in separate statements, so
//     concurrent updates of one document are lost on either backend (the
//     tests measured 74 of 400 acknowledged $inc and 68 successful
//     conditional pops of a 20-element array, TestServerAtomicity's
//     races). Behind a proxy that runs the write commands of a collection
//     one at a time (as the tests' server does, testservers'
//     -serialize-writes) it is atomic per document (400 of 400, 20 of 20)
//     and the guarantees above hold. Its jsonb storage cannot hold a
//     string with NUL, so session ids and items containing \x00 fail.
//     Supported for concurrent writers only behind such a serializer.
//   - FerretDB v1 with its SQLite backend: not atomic either (counters of
//     46 to 57 of 400, 119 to 177 pops of 20 in three runs,
//     TestFerretDBSQLiteNotAtomic): concurrent writers of one session can
//     be handed one seq twice, commit two batches at one _top, or pop one
//     item twice. Unsupported for concurrent writers; a single writer per
//     session is fine. The tests run it behind the same serializer, which
//     makes it atomic per document like the PostgreSQL backend.
//
// # Checkpoints
//
// Run-state checkpoints (session.CheckpointStore) live in their own
// collection, agent_checkpoints by default (Options.CheckpointsCollection),
// which the Python SDK never reads. Every version of a checkpoint is a
// document of its own, and its _id names the session, the checkpoint and
// the version (the id's length first, so that no two triples share an
// _id; FerretDB finds a document by _id without scanning). A save from
// version v is the insert of version v+1: of two saves from v the unique
// _id lets exactly one in, on every server. That is the one atomic step
// the design relies on, because FerretDB's conditional updates are not
// atomic: two findAndModify calls filtered on {version: v} both match and
// both succeed (the "lost $inc" of the FerretDB section, which would give
// two copies of one checkpoint the same version).
//
// A version is inserted pending and committed by its save after a check:
// the version it was saved from is still committed (and, for a save from
// a given version, still the live checkpoint), and no committed version
// lies above it. The check catches a save from a stale version whose
// successor was already deleted as old: its insert gets in, and it would
// otherwise commit a version below the newest. Readers read only
// committed versions, and nobody saves from a pending one, so a version
// above a pending one can only be older than it. Once committed, the older
// versions are deleted. A save that finds its version pending waits for
// that save's outcome (at most 8 seconds) before it answers, and takes
// over a version left pending once it is 3 seconds old (its save most
// likely died between insert and commit, as a killed process does); each
// pending version carries its save's random owner token, which that
// save's commit names, so a save whose version was taken over reports a
// conflict, never a save it lost. A delete commits a tombstone ({deleted: true}, no
// document) as the next version: a later save at version 0 creates the
// checkpoint again above it, and a save from a version before the delete
// stays a conflict. The current checkpoint of a name is its newest
// committed version, unless that is a tombstone.
//
// Clear and ReplaceItems keep a session's checkpoints; RemoveSession (and
// sessionctl check's cleanup, through the URL store) deletes them with the
// session's documents. A save writes no session document, so a session
// holding only checkpoints is not listed by ListSessions.
//
// With a TTL a checkpoint carries expires_at, its save plus the TTL, and
// it is live while that has not passed or while the session document's
// expiry has not (every write to the session restarts its checkpoints'
// clock), unless the restart of an expired session ended it (its expiry
// lies below _expired_through: it was saved before the session expired). A
// save restarts the session's expiry as Touch does. The restart of an
// expired session deletes the checkpoints it ended, and a Store with a TTL
// restarts an expired session before clearing it (a Clear refreshes the
// expiry, which would otherwise bring such checkpoints back). Expiry
// assumes the Stores writing one session share its TTL. A save racing the
// restart that ends the checkpoint it saves from can be kept.
//
// # Scale-out
//
// On a replica set every read and write goes to the primary, with write
// concern majority by default (Options.WriteConcern). To shard, use
//
//	agent_sessions     shard key {session_id: 1}
//	agent_messages     shard key {session_id: 1, seq: 1}
//	agent_checkpoints  shard key {session_id: 1}
//
// Every operation names session_id, so it targets the shards owning that
// session's range; with {session_id, seq} one session's documents sit in
// one contiguous range ordered by seq, which the latest-N sort walks
// backwards, while a session too large for one chunk can still split by
// seq. The one unique index, {session_id} on sessions, is its collection's
// shard key. Every checkpoint operation names session_id (its single-
// document writes name _id too); a sharded cluster enforces a unique _id
// per shard only, which is enough, since every version of a checkpoint
// has its session's shard key value and so lives on one shard. The session document's findAndModify has
// the full shard key;
// the pop's single-document update or delete names _id and session_id,
// which a sharded cluster accepts on every version (a single-document write
// must name _id or the full shard key) and routes by session_id.
//
// # Expiry
//
// The Python SDK's MongoDBSession has no TTL: it stamps no expiry on what
// it writes and refreshes none. Expiry is therefore built on one rule: no
// item is ever lost because of an expiry it was written after, whichever
// language wrote it; Go hides only what is about to be deleted physically;
// and a write deletes only what it has itself read as expired.
//
//   - The session: each write of a Store with Options.TTL (append, pop,
//     clear, replace, Touch, a checkpoint save) sets the session document's
//     expires_at to now+TTL; reads do not. Checkpoints expire with it (see
//     "Checkpoints").
//   - Stamps: a message document is governed by that expiry only once it is
//     stamped with an expires_at date of its own, the field the TTL index
//     acts on. Documents written by this package are stamped (now+TTL+slack,
//     slack = min(TTL, 1h)); the stamps of a session's documents are pushed
//     forward by its writes (at most once per slack/2 of activity), and
//     the push also stamps the documents the Python SDK wrote meanwhile.
//     _purge_by on the session document bounds every stamp from above.
//   - Hiding: once the session's expires_at has passed, every stamped
//     document is hidden, at once, from reads and pops. An unstamped
//     document (one the Python SDK wrote after the last push, before or
//     after the expiry) is never hidden: it is shown, popped and kept.
//   - Deleting: where the server has TTL indexes, a hidden document goes
//     when its stamp passes, at most the slack after the session's expiry
//     (plus the TTL monitor's minute). The next write of a Store to the
//     expired session restarts it: one conditional update of the session
//     document sets _expired_through to _purge_by (every document stamped
//     so far stays hidden for good; later stamps are always above it) and
//     refreshes the expiry (a Store without a TTL drops it), then deletes
//     the stamped documents up to _expired_through: exactly those it read
//     as expired. The generation is kept, so the items Python wrote after
//     the expiry stay in both languages' view. A pop of an expired session
//     refreshes nothing: it pops only what the expiry does not hide.
//   - Session documents have no TTL index: a session document removed by
//     one would take the items Python wrote after the expiry out of every
//     view. An older release of this package made one; a Store with a TTL
//     drops it on first use.
//
// What each side sees in between (after the expiry, before the deletion):
// Go reads only the unstamped documents; the Python SDK reads every
// document of the generation. On MongoDB that lasts until the TTL monitor
// passes the stamps (at most the slack after the expiry). On a server
// without TTL indexes (FerretDB v1; Store.TTLIndexError says why they are
// missing) it lasts until the next write of a Store with or without a TTL
// to that session: nothing else deletes the hidden documents, and a
// session no one writes again keeps them, hidden from Go and shown to
// Python. Expiry instants are computed by clients: keep clocks in sync
// (NTP).
//
// # The Python SDK
//
// Python and Go share a database in both directions: each reads, appends,
// pops and clears what the other wrote, in any interleaving, and both read
// the same items in the same order (TestPythonInterop issues the SDK's
// exact commands beside this package's calls). The Python SDK has no TTL
// and no replace; a read racing a Python clear can see that clear's
// collection half done, since it writes no marker. Items are stored
// exactly as given; Python stores compact json.dumps output, which may
// hold NaN, Infinity and -Infinity: such records are read, popped and
// returned byte for byte.
//
// # FerretDB
//
// The tests run against FerretDB v1.24 with its SQLite backend behind a
// write serializer when no MongoDB is at hand (see "Servers and their
// guarantees"). It lacks TTL indexes (see "Expiry" for what that
// changes), pipeline updates, $lookup, projections on findAndModify and
// $slice projections, none of which the package uses. Without a
// serializer its single-document updates are not atomic: concurrent
// findAndModify calls lose $inc increments and can move a counter
// backwards, so concurrent writers of one session can be handed one seq
// twice (both batches are kept, each whole, in the server's order), and
// concurrent appends, clears, replaces or pops of one session are not
// safe on it; on MongoDB they are. Checkpoint saves use no conditional
// update, and are safe on both (see "Checkpoints").
//
// The package carries three small guards for it, each named, tested on
// the semantics MongoDB has as well, and harmless there:
//
//   - Guard "one index per command" (Store.ensureIndexes): FerretDB drops
//     the connection when one createIndexes names several existing indexes
//     or when two race on a new collection, so indexes are made one per
//     command, serialised in the process, and retried (twice) after a
//     network error only. createIndexes is idempotent on every server, so
//     on MongoDB this costs a round trip per index once per Store and
//     changes nothing else (TestGuardIndexRetry).
//   - Guard "look before replacing an index" (Store.ensurePlainIndex):
//     FerretDB accepts a plain index over a unique one on the same keys
//     without the conflict MongoDB reports, so the indexes are listed
//     first and a unique {session_id, seq} left by an older release is
//     dropped, on every server (TestExistingIndexesAndData).
//   - Guard "lost $inc" (Session.guardLostUpdate): each Session handle keeps
//     a floor, the next seq after the highest it has reserved or read; a
//     reservation below it is a lost update, and the handle pushes the
//     counter up to the floor with $max and reserves again, so that its own
//     batches never land out of order. It never makes a write fail. On
//     MongoDB, whose $inc is atomic, it fires only when another writer set
//     the counter back (an older Python release's clear deleted the session
//     document) or after reading a document an older release of this
//     package numbered one seq high; pushing the counter up then keeps every
//     later batch above what the handle has seen (TestGuardLostInc).
package mongo
