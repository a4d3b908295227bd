package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Store is a MongoDB database holding sessions: a sessions collection and
// a messages collection. Every Session handle of a Store shares its client.
// A Store is safe for concurrent use.
type Store struct {
	client   *mongodrv.Client
	owned    bool
	opts     Options
	sessions *mongodrv.Collection
	messages *mongodrv.Collection
	// checkpoints holds the sessions' run-state checkpoints, one document
	// per version (see checkpoints.go).
	checkpoints *mongodrv.Collection
	// operations holds the operation ids of AddItemsOnce once moved out
	// of their session documents (see once.go).
	operations *mongodrv.Collection
	closed     atomic.Bool
	est        estimator

	idxMu   sync.Mutex
	idxDone bool
	ttlErr  error // why the TTL indexes could not be created, if they could not

	ckIdxDone  bool // the checkpoints index is made (guarded by idxMu)
	opsIdxDone bool // the operations index is made (guarded by idxMu)

	appends appendLocks // one append at a time per session id in this Store
}

// New returns a Store on client. The client stays the caller's: Close does
// not disconnect it. Indexes are created on first use.
func New(client *mongodrv.Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("mongo: nil client")
	}
	return newStore(client, false, opts)
}

// Open connects to the MongoDB deployment at uri (mongodb:// or
// mongodb+srv://) and returns a Store on it. When opts.Database is empty,
// the database is the one named in the URI's path, else DefaultDatabase.
// The Store owns the client it made: Close disconnects it.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.Database == "" {
		db, err := databaseFromURI(uri)
		if err != nil {
			return nil, err
		}
		opts.Database = db
	}
	client, err := mongodrv.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return nil, fmt.Errorf("mongo: connect: %w", err)
	}
	st, err := newStore(client, true, opts)
	if err != nil {
		_ = client.Disconnect(ctx)
		return nil, err
	}
	return st, nil
}

func newStore(client *mongodrv.Client, owned bool, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	db := client.Database(opts.Database)
	co := options.Collection().SetWriteConcern(opts.WriteConcern)
	return &Store{
		client:      client,
		owned:       owned,
		opts:        opts,
		sessions:    db.Collection(opts.SessionsCollection, co),
		messages:    db.Collection(opts.MessagesCollection, co),
		checkpoints: db.Collection(opts.CheckpointsCollection, co),
		operations:  db.Collection(opts.OperationsCollection, co),
	}, nil
}

// databaseFromURI returns the database named in a MongoDB URI's path, or
// "" when there is none. It does not resolve mongodb+srv hosts.
func databaseFromURI(uri string) (string, error) {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", fmt.Errorf("mongo: %q is not a mongodb:// or mongodb+srv:// URI", redact(uri))
	}
	_, path, ok := strings.Cut(rest, "/")
	if !ok {
		return "", nil
	}
	path, _, _ = strings.Cut(path, "?")
	db, err := url.PathUnescape(path)
	if err != nil {
		return "", fmt.Errorf("mongo: database name in URI: %w", err)
	}
	return db, nil
}

// redact drops the user information of a URI, for error messages.
func redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "<uri>"
	}
	if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
		rest = rest[at+1:]
	}
	return scheme + "://" + rest
}

// Client returns the client the Store uses.
func (st *Store) Client() *mongodrv.Client { return st.client }

// Database returns the name of the Store's database.
func (st *Store) Database() string { return st.opts.Database }

// Session returns a handle on session id. It fails for the empty id, for
// an id that is not valid UTF-8 (with an error wrapping
// session.ErrInvalidSessionID: BSON strings are UTF-8, and the driver would
// store such an id altered, so that distinct ids could share one session),
// and after Close.
func (st *Store) Session(id string) (*Session, error) {
	if err := driver.ValidateID(id); err != nil {
		return nil, err
	}
	if !utf8.ValidString(id) {
		return nil, fmt.Errorf("mongo: %w: %q is not valid UTF-8, which BSON strings must be", session.ErrInvalidSessionID, id)
	}
	if st.closed.Load() {
		return nil, session.ErrClosed
	}
	return &Session{st: st, id: id}, nil
}

// Close makes every handle of the Store return session.ErrClosed, and
// disconnects the client if Open made it. An injected client is left
// connected. Closing twice is a no-op.
func (st *Store) Close(ctx context.Context) error {
	if !st.closed.CompareAndSwap(false, true) {
		return nil
	}
	if st.owned {
		if err := st.client.Disconnect(ctx); err != nil {
			return fmt.Errorf("mongo: disconnect: %w", err)
		}
	}
	return nil
}

// now reads the Store's clock.
func (st *Store) now() time.Time { return st.opts.Now() }

// ensureIndexes creates the indexes once per Store. createIndexes is
// idempotent on the server, so concurrent first calls only cost a
// redundant round trip. A failure is returned and retried on the next
// call, except for the TTL indexes, which are best effort: servers without
// TTL indexes (FerretDB v1) still expire sessions through the expiry
// filters.
func (st *Store) ensureIndexes(ctx context.Context) error {
	st.idxMu.Lock()
	done := st.idxDone
	st.idxMu.Unlock()
	if done {
		return nil
	}
	// One Store at a time per process: FerretDB v1 drops the connection
	// when two createIndexes race on a new collection (across processes, a
	// retry then finds the index made).
	indexMu.Lock()
	defer indexMu.Unlock()
	if err := retryNetwork(ctx, func() error {
		_, err := st.sessions.Indexes().CreateOne(ctx, mongodrv.IndexModel{
			Keys:    bson.D{{Key: fSessionID, Value: 1}},
			Options: options.Index().SetUnique(true),
		})
		return err
	}); err != nil {
		return fmt.Errorf("create the unique session_id index: %w", err)
	}
	// One index per command: FerretDB v1 drops the connection when a
	// createIndexes naming several indexes finds them already there.
	//
	// {session_id, seq} serves latest-N over all generations and garbage
	// collection by seq. It is not unique: the Python SDK's own index is
	// not, and a unique one would make a Python write fail wherever two
	// documents share a seq (data numbered by an older release of this
	// package, or a $inc lost by FerretDB). An older release of this
	// package made it unique; that index is replaced.
	if err := retryNetwork(ctx, func() error {
		return st.ensurePlainIndex(ctx, bson.D{{Key: fSessionID, Value: 1}, {Key: fMsgSeq, Value: 1}})
	}); err != nil {
		return fmt.Errorf("create the {session_id, seq} index: %w", err)
	}
	// {session_id, generation, seq} is the Python SDK's: reads and pops
	// within one generation (ours pop too).
	if err := retryNetwork(ctx, func() error {
		_, err := st.messages.Indexes().CreateOne(ctx, mongodrv.IndexModel{
			Keys: bson.D{{Key: fSessionID, Value: 1}, {Key: fMsgGeneration, Value: 1}, {Key: fMsgSeq, Value: 1}},
		})
		return err
	}); err != nil {
		return fmt.Errorf("create the {session_id, generation, seq} index: %w", err)
	}
	if err := st.createCheckpointIndex(ctx); err != nil {
		return err
	}
	if err := st.createOpsIndex(ctx); err != nil {
		return err
	}
	var ttlErr error
	if st.opts.TTL > 0 {
		ttlErr = st.createTTLIndexes(ctx)
		if ttlErr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			slog.DebugContext(ctx, "mongo: TTL indexes unavailable; expiry relies on the read filters",
				"database", st.opts.Database, "error", ttlErr)
		}
	}
	st.idxMu.Lock()
	st.idxDone, st.ttlErr = true, ttlErr
	st.idxMu.Unlock()
	return nil
}

// ensurePlainIndex creates a non-unique index on keys in the messages
// collection; a unique index on the same keys (made by an older release of
// this package) is dropped first. An index is no data: dropping one loses
// nothing.
func (st *Store) ensurePlainIndex(ctx context.Context, keys bson.D) error {
	// Look first: not every server reports the conflict (FerretDB v1
	// accepts the plain index and keeps the unique one).
	name, unique, err := st.indexOn(ctx, st.messages, keys)
	if err != nil {
		return err
	}
	if name != "" && unique {
		if err := st.messages.Indexes().DropOne(ctx, name); err != nil {
			return fmt.Errorf("drop the unique index %s of an older release: %w", name, err)
		}
		slog.InfoContext(ctx, "mongo: replaced a unique index by a plain one, so that no Python write can fail on it",
			"collection", st.opts.MessagesCollection, "index", name)
	}
	_, err = st.messages.Indexes().CreateOne(ctx, mongodrv.IndexModel{Keys: keys})
	return err
}

// codeNamespaceNotFound is MongoDB's error code for listIndexes on a
// collection that does not exist.
const codeNamespaceNotFound = 26

// indexOn returns the name of coll's index on exactly keys, and whether it
// is unique; "" when there is none.
func (st *Store) indexOn(ctx context.Context, coll *mongodrv.Collection, keys bson.D) (string, bool, error) {
	want, err := bson.Marshal(keys)
	if err != nil {
		return "", false, err
	}
	cur, err := coll.Indexes().List(ctx)
	var se mongodrv.ServerError
	if errors.As(err, &se) && se.HasErrorCode(codeNamespaceNotFound) {
		return "", false, nil // no collection yet (MongoDB), so no index
	}
	if err != nil {
		return "", false, fmt.Errorf("list indexes: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	for cur.Next(ctx) {
		var spec struct {
			Name   string   `bson:"name"`
			Key    bson.Raw `bson:"key"`
			Unique bool     `bson:"unique"`
		}
		if err := cur.Decode(&spec); err != nil {
			return "", false, fmt.Errorf("list indexes: %w", err)
		}
		if sameKeys(spec.Key, want) {
			return spec.Name, spec.Unique, nil
		}
	}
	return "", false, cur.Err()
}

// sameKeys compares two index key documents, field by field, numbers by
// value (servers report 1 as an int32 or a double).
func sameKeys(a, b bson.Raw) bool {
	ea, err1 := a.Elements()
	eb, err2 := b.Elements()
	if err1 != nil || err2 != nil || len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if ea[i].Key() != eb[i].Key() {
			return false
		}
		x, okx := integer(ea[i].Value())
		y, oky := integer(eb[i].Value())
		if !okx || !oky || x != y {
			return false
		}
	}
	return true
}

// indexMu serialises index creation in the process.
var indexMu sync.Mutex

// retryNetwork runs f, again up to twice more after a network error
// (createIndexes is idempotent).
func retryNetwork(ctx context.Context, f func() error) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			}
		}
		if err = f(); err == nil || !mongodrv.IsNetworkError(err) {
			return err
		}
	}
	return err
}

// createTTLIndexes creates the TTL index of the messages collection:
// a message document goes when its expires_at passes. Session documents
// have none: the Python SDK never refreshes an expiry, so a session
// document removed by a TTL index could take the items Python wrote after
// the expiry out of every reader's view (and restart its counter). An
// older release of this package made one; it is dropped.
func (st *Store) createTTLIndexes(ctx context.Context) error {
	if _, err := st.messages.Indexes().CreateOne(ctx, mongodrv.IndexModel{
		Keys:    bson.D{{Key: fExpiresAt, Value: 1}},
		Options: options.Index().SetExpireAfterSeconds(0),
	}); err != nil {
		return err
	}
	name, _, err := st.indexOn(ctx, st.sessions, bson.D{{Key: fExpiresAt, Value: 1}})
	if err != nil || name == "" {
		return err
	}
	return st.sessions.Indexes().DropOne(ctx, name)
}

// TTLIndexError reports why the TTL indexes could not be created (nil when
// they were, or when the Store has no TTL or has not been used yet).
func (st *Store) TTLIndexError() error {
	st.idxMu.Lock()
	defer st.idxMu.Unlock()
	return st.ttlErr
}

// cleanupContext returns a context for the steps that follow a committed
// write (marker, garbage collection): they run to completion even if the
// caller's context is cancelled, bounded by a timeout.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// RemoveSession deletes every document of session id: its checkpoints,
// its operation ids, its messages and its session document. Clear keeps the session document (its
// counters, as Python's clear_session does), an empty marker and the
// checkpoints; RemoveSession is for sessions that must leave no trace,
// such as sessionctl check's probes. Nobody may write the session
// meanwhile: a write between the deletes could leave documents behind a
// new session document.
func (st *Store) RemoveSession(ctx context.Context, id string) (err error) {
	defer refusedID(&err, id, "")
	if err := driver.ValidateID(id); err != nil {
		return err
	}
	filter := bson.D{{Key: fSessionID, Value: id}}
	if _, err := st.checkpoints.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("mongo: remove session: %w", committing(err))
	}
	if _, err := st.operations.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("mongo: remove session: %w", committing(err))
	}
	if _, err := st.messages.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("mongo: remove session: %w", committing(err))
	}
	if _, err := st.sessions.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("mongo: remove session: %w", committing(err))
	}
	return nil
}
