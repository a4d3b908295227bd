package adapters

import (
	"context"
	"net/url"
	"sort"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/adapters/mongo"
	"github.com/agentsessions/sessions/session"
)

// Query parameters the mongodb schemes take for the adapter; every other
// parameter is the driver's own connection-string option.
var mongoOptions = []string{"sessions_collection", "messages_collection", "ttl", "max_batch_bytes"}

func init() {
	for _, scheme := range []string{"mongodb", "mongodb+srv"} {
		register(scheme, opener{options: mongoOptions, passthrough: true, open: openMongo})
	}
}

// openMongo opens mongodb:// and mongodb+srv:// URLs; the database is the
// URL's path. Options: sessions_collection, messages_collection, ttl and
// max_batch_bytes.
func openMongo(ctx context.Context, u *url.URL, q url.Values, o Options) (Store, error) {
	opts := mongo.Options{
		SessionsCollection: first(q, "sessions_collection"),
		MessagesCollection: first(q, "messages_collection"),
		OnCorrupt:          o.OnCorrupt,
	}
	var err error
	if opts.TTL, err = durationOption(q, "ttl"); err != nil {
		return nil, err
	}
	if v := first(q, "max_batch_bytes"); v != "" {
		if opts.MaxBatchBytes, err = strconv.Atoi(v); err != nil || opts.MaxBatchBytes < 0 {
			return nil, badOption("max_batch_bytes", v, "a non-negative integer")
		}
	}
	rest := *u
	pass := url.Values{}
	for k, vs := range q {
		if !contains(mongoOptions, k) {
			pass[k] = vs
		}
	}
	rest.RawQuery = pass.Encode()
	st, err := mongo.Open(ctx, rest.String(), opts)
	if err != nil {
		return nil, err
	}
	return &mongoStore{sessionStore[*mongo.Session]{
		session:  st.Session,
		declared: session.Caps(session.CapLatest, session.CapReplace, session.CapTTL),
		close:    func() error { return st.Close(context.Background()) },
	}, st, opts}, nil
}

type mongoStore struct {
	sessionStore[*mongo.Session]
	st   *mongo.Store
	opts mongo.Options
}

// ListSessions lists the sessions that have a session document, sorted.
func (m *mongoStore) ListSessions(ctx context.Context) ([]string, error) {
	coll := m.opts.SessionsCollection
	if coll == "" {
		coll = mongo.DefaultSessionsCollection
	}
	res := m.st.Client().Database(m.st.Database()).Collection(coll).Distinct(ctx, "session_id", bson.D{})
	var ids []string
	if err := res.Decode(&ids); err != nil {
		return nil, err
	}
	sort.Strings(ids)
	return ids, nil
}
