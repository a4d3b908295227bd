package mongo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// schemes are the URL schemes of MongoDB stores.
var schemes = []string{"mongodb", "mongodb+srv"}

// urlOptions are the query options the adapter takes; every other option
// is the driver's own connection-string option, validated by the driver.
var urlOptions = []string{"sessions_collection", "messages_collection", "checkpoints_collection", "operations_collection", "ttl", "max_batch_bytes"}

func init() {
	for _, s := range schemes {
		adapters.Register(s, URLOpener{})
	}
}

// URLOpener opens mongodb:// and mongodb+srv:// URLs; the database is the
// URL's path (default "agents"). Options: sessions_collection (default
// agent_sessions), messages_collection (default agent_messages),
// checkpoints_collection (default agent_checkpoints),
// operations_collection (default agent_operations), ttl
// (Options.TTL, default 0: never expire) and max_batch_bytes
// (Options.MaxBatchBytes, default and most 16 MiB).
//
// Opening creates nothing. With adapters.Options.ReadOnly the Store never
// creates indexes, which its reads otherwise do on first use.
type URLOpener struct{}

// OpenStoreURL connects to the deployment u names.
func (URLOpener) OpenStoreURL(ctx context.Context, u *url.URL, o adapters.Options) (adapters.Store, error) {
	q, err := adapters.ParsePassthroughQuery(u, urlOptions...)
	if err != nil {
		return nil, err
	}
	opts := Options{
		SessionsCollection:    q.Get("sessions_collection"),
		MessagesCollection:    q.Get("messages_collection"),
		CheckpointsCollection: q.Get("checkpoints_collection"),
		OperationsCollection:  q.Get("operations_collection"),
		OnCorrupt:             o.OnCorrupt,
	}
	for _, name := range []string{"sessions_collection", "messages_collection", "checkpoints_collection", "operations_collection"} {
		if q.Has(name) {
			if err := validCollectionName(q.Get(name)); err != nil {
				return nil, fmt.Errorf("%w: option %s: %w", adapters.ErrInvalidDSN, name, err)
			}
		}
	}
	if opts.TTL, err = q.Duration("ttl"); err != nil {
		return nil, err
	}
	if opts.MaxBatchBytes, err = q.Int("max_batch_bytes"); err != nil {
		return nil, err
	}
	if _, err := opts.withDefaults(); err != nil {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	if unknown := unknownDriverOptions(q.Passthrough()); len(unknown) > 0 {
		return nil, fmt.Errorf("%w: unknown option(s) %s for %s (the adapter's: %s; the others are the driver's connection-string options)",
			adapters.ErrInvalidDSN, strings.Join(unknown, ", "), strings.ToLower(u.Scheme), strings.Join(urlOptions, ", "))
	}
	uri := q.DriverURL(u)
	db, err := databaseFromURI(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
	}
	if db != "" {
		if err := validDatabaseName(db); err != nil {
			return nil, fmt.Errorf("%w: %w", adapters.ErrInvalidDSN, err)
		}
	}
	st, err := Open(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		st.idxMu.Lock()
		st.idxDone = true // reads find what is there, and make no index
		st.ckIdxDone = true
		st.opsIdxDone = true
		st.idxMu.Unlock()
	}
	closeStore := func() error { return st.Close(context.Background()) }
	base, err := adapters.NewStore(st.Session, closeStore)
	if err != nil {
		_ = closeStore()
		return nil, err
	}
	return &urlStore{Store: base, st: st}, nil
}

// validCollectionName reports why name cannot name a collection of the
// adapter: empty, longer than 120 bytes, not UTF-8, holding '$' or NUL,
// starting with '.' or "system." (the server's own collections).
func validCollectionName(name string) error {
	switch {
	case name == "":
		return errors.New("empty collection name")
	case len(name) > 120:
		return fmt.Errorf("collection name of %d bytes (at most 120)", len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("collection name %q is not UTF-8", name)
	case strings.ContainsAny(name, "$\x00"):
		return fmt.Errorf("collection name %q holds '$' or NUL", name)
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, "."):
		return fmt.Errorf("collection name %q starts or ends with '.'", name)
	case strings.HasPrefix(name, "system."):
		return fmt.Errorf("collection name %q is in the server's system namespace", name)
	}
	return nil
}

// unknownDriverOptions returns the options the driver does not know (it
// would ignore them), sorted. It parses them alone, on a plain mongodb://
// URI so that no DNS lookup happens; the driver's srv options are left to
// the driver.
func unknownDriverOptions(opts url.Values) []string {
	probe := url.Values{}
	for k, vs := range opts {
		if !strings.HasPrefix(strings.ToLower(k), "srv") {
			probe[k] = vs
		}
	}
	if len(probe) == 0 {
		return nil
	}
	cs, err := connstring.Parse("mongodb://localhost/?" + probe.Encode())
	if err != nil {
		return nil // a value the driver refuses: Open reports it
	}
	var out []string
	for k := range probe {
		if _, ok := cs.UnknownOptions[strings.ToLower(k)]; ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// validDatabaseName reports why name cannot name a database.
func validDatabaseName(name string) error {
	switch {
	case len(name) > 63:
		return fmt.Errorf("database name of %d bytes (at most 63)", len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("database name %q is not UTF-8", name)
	case strings.ContainsAny(name, "/\\. \"$*<>:|?\x00"):
		return fmt.Errorf(`database name %q holds one of / \ . " $ * < > : | ? space NUL`, name)
	}
	return nil
}

// urlStore is a Store opened from a URL.
type urlStore struct {
	adapters.Store
	st *Store
}

// ListSessions lists the sessions that have a session document or a
// checkpoint (as ListSessionsPage does), sorted.
func (s *urlStore) ListSessions(ctx context.Context) ([]string, error) {
	if s.st.closed.Load() {
		return nil, session.ErrClosed
	}
	ids, err := distinctIDs(ctx, s.st.sessions, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("mongo: list sessions: %w", err)
	}
	ckpts, err := distinctIDs(ctx, s.st.checkpoints,
		bson.D{committed, {Key: fCkptDeleted, Value: bson.D{{Key: "$ne", Value: true}}}})
	if err != nil {
		return nil, fmt.Errorf("mongo: list sessions: checkpoints: %w", err)
	}
	return mergeIDs(ids, ckpts), nil
}

// AppendRaw stores raw, unvalidated, as the next record of session id: it
// reserves a seq as every write does, then inserts a one-record batch.
func (s *urlStore) AppendRaw(ctx context.Context, id string, raw []byte) (err error) {
	defer refusedID(&err, id, "")
	h, err := s.st.Session(id)
	if err != nil {
		return err
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return fmt.Errorf("mongo: append raw: %w", err)
	}
	sd, now, err := h.reserve(ctx, 1)
	if err != nil {
		return fmt.Errorf("mongo: append raw: %w", err)
	}
	d := bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: fSessionID, Value: id},
		{Key: fMsgSeq, Value: sd.batchSeq()},
		{Key: fMsgGeneration, Value: sd.Generation},
		{Key: fMessageData, Value: bson.A{string(raw)}},
		{Key: fCreatedAt, Value: now},
	}
	if exp := s.st.messageExpiryPtr(now); exp != nil {
		d = append(d, bson.E{Key: fExpiresAt, Value: *exp})
	}
	if _, err := s.st.messages.InsertOne(ctx, d); err != nil {
		return fmt.Errorf("mongo: append raw: %w", committing(err))
	}
	return nil
}

// RemoveSession deletes every document of session id (Store.RemoveSession).
func (s *urlStore) RemoveSession(ctx context.Context, id string) error {
	return s.st.RemoveSession(ctx, id)
}

// SessionTimes returns the session document's created_at and updated_at.
func (s *urlStore) SessionTimes(ctx context.Context, id string) (_ adapters.SessionTimes, _ bool, err error) {
	defer refusedID(&err, id, "")
	var t adapters.SessionTimes
	if _, err := s.st.Session(id); err != nil {
		return t, false, err
	}
	var doc struct {
		Created time.Time `bson:"created_at"`
		Updated time.Time `bson:"updated_at"`
	}
	err = s.st.sessions.FindOne(ctx, bson.D{{Key: fSessionID, Value: id}}).Decode(&doc)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("mongo: session times: %w", err)
	}
	return adapters.SessionTimes{Created: doc.Created, Updated: doc.Updated}, true, nil
}

// SetSessionTimes sets the session document's non-zero times.
func (s *urlStore) SetSessionTimes(ctx context.Context, id string, t adapters.SessionTimes) (err error) {
	defer refusedID(&err, id, "")
	if _, err := s.st.Session(id); err != nil {
		return err
	}
	set := bson.D{}
	if !t.Created.IsZero() {
		set = append(set, bson.E{Key: fCreatedAt, Value: t.Created.UTC()})
	}
	if !t.Updated.IsZero() {
		set = append(set, bson.E{Key: fUpdatedAt, Value: t.Updated.UTC()})
	}
	if len(set) == 0 {
		return nil
	}
	if _, err := s.st.sessions.UpdateOne(ctx, bson.D{{Key: fSessionID, Value: id}}, bson.D{{Key: "$set", Value: set}}); err != nil {
		return fmt.Errorf("mongo: set session times: %w", committing(err))
	}
	return nil
}
