package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/mongo"
)

// mongoSchema is what check needs to leave a MongoDB database's schema as
// it found it: the collections the store's options name (sessions,
// messages, checkpoints, operation ids), which of them existed, and their
// indexes.
type mongoSchema struct {
	uri, redacted, db string
	names             []string
	before            map[mongoObject]bool
}

// mongoObject is a collection (index "") or an index of one.
type mongoObject struct{ coll, index string }

func (o mongoObject) String() string {
	if o.index == "" {
		return "collection " + o.coll
	}
	return "index " + o.index + " of collection " + o.coll
}

// mongoOptions are the MongoDB adapter's own URL options (adapters/mongo).
var mongoOptions = []string{"sessions_collection", "messages_collection", "checkpoints_collection", "operations_collection", "ttl", "max_batch_bytes"}

func snapshotMongoSchema(ctx context.Context, u *url.URL) (*mongoSchema, error) {
	q, err := adapters.ParsePassthroughQuery(u, mongoOptions...)
	if err != nil {
		return nil, nil // the open says why
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	sc := &mongoSchema{uri: q.DriverURL(u), redacted: redactDSN(u.String()), names: []string{
		or(q.Get("sessions_collection"), mongo.DefaultSessionsCollection),
		or(q.Get("messages_collection"), mongo.DefaultMessagesCollection),
		or(q.Get("checkpoints_collection"), mongo.DefaultCheckpointsCollection),
		or(q.Get("operations_collection"), mongo.DefaultOperationsCollection),
	}}
	cs, err := connstring.Parse(sc.uri)
	if err != nil {
		return nil, nil // the open says why
	}
	sc.db = or(cs.Database, mongo.DefaultDatabase)
	client, err := mongodrv.Connect(options.Client().ApplyURI(sc.uri))
	if err != nil {
		return nil, nil // the open says why
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	objs, err := sc.objects(ctx, client.Database(sc.db))
	if err != nil {
		return nil, fmt.Errorf("reading the collections of %s before the check: %w", sc.redacted, err)
	}
	sc.before = map[mongoObject]bool{}
	for _, o := range objs {
		sc.before[o] = true
	}
	return sc, nil
}

// objects lists the store's collections that exist and their indexes,
// each collection before its indexes.
func (sc *mongoSchema) objects(ctx context.Context, db *mongodrv.Database) ([]mongoObject, error) {
	colls, err := db.ListCollectionNames(ctx, bson.D{{Key: "name", Value: bson.D{{Key: "$in", Value: sc.names}}}})
	if err != nil {
		return nil, err
	}
	sort.Strings(colls)
	var out []mongoObject
	for _, c := range colls {
		out = append(out, mongoObject{coll: c})
		specs, err := db.Collection(c).Indexes().ListSpecifications(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range specs {
			out = append(out, mongoObject{coll: c, index: s.Name})
		}
	}
	return out, nil
}

// restore drops what the check added: each of the store's collections
// that was not there before, if it is empty, and each new index of a
// collection that was. MongoDB has no transaction over a count and a
// drop, so a new collection is first renamed out of the way (one atomic
// renameCollection: a writer's insert after it creates the collection
// again, and nothing it writes is dropped), then counted, then dropped
// if empty or renamed back if not. A collection that holds documents, or
// that something created again meanwhile, is left and named.
func (sc *mongoSchema) restore(ctx context.Context) (dropped, left []string, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	client, err := mongodrv.Connect(options.Client().ApplyURI(sc.uri))
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	db := client.Database(sc.db)
	objs, err := sc.objects(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	var tag [4]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return nil, nil, err
	}
	admin := client.Database("admin")
	rename := func(from, to string) error {
		return admin.RunCommand(ctx, bson.D{
			{Key: "renameCollection", Value: sc.db + "." + from},
			{Key: "to", Value: sc.db + "." + to},
		}).Err()
	}
	var gone []string
	for _, o := range objs {
		if o.index != "" || sc.before[o] {
			continue
		}
		c := o.coll
		aside := "sessionctl-check-" + hex.EncodeToString(tag[:]) + "-" + c
		if err := rename(c, aside); err != nil {
			return dropped, left, fmt.Errorf("collection %s: %w", c, err)
		}
		n, err := db.Collection(aside).CountDocuments(ctx, bson.D{})
		if err != nil {
			return dropped, left, fmt.Errorf("collection %s (renamed %s): %w", c, aside, err)
		}
		if n == 0 {
			if err := db.Collection(aside).Drop(ctx); err != nil {
				return dropped, left, fmt.Errorf("collection %s (renamed %s): %w", c, aside, err)
			}
			dropped = append(dropped, o.String())
			gone = append(gone, c)
			continue
		}
		docs := plural(int(n), "document", "documents")
		if err := rename(aside, c); err != nil {
			left = append(left, fmt.Sprintf("collection %s, renamed %s (%s, written during the check by something else; renaming it back: %v)", c, aside, docs, err))
			continue
		}
		left = append(left, fmt.Sprintf("collection %s (%s, written during the check by something else)", c, docs))
	}
	for _, o := range objs {
		if o.index == "" || sc.before[o] || !sc.before[mongoObject{coll: o.coll}] {
			continue // an old index, or one of a new collection
		}
		if err := db.Collection(o.coll).Indexes().DropOne(ctx, o.index); err != nil {
			return dropped, left, fmt.Errorf("%s: %w", o, err)
		}
		dropped = append(dropped, o.String())
	}
	// A collection dropped above that a writer created again meanwhile
	// holds what it wrote: say so.
	after, err := sc.objects(ctx, db)
	if err != nil {
		return dropped, left, err
	}
	for _, o := range after {
		if o.index == "" && slices.Contains(gone, o.coll) {
			left = append(left, fmt.Sprintf("collection %s (created again by something else while the check dropped it)", o.coll))
		}
	}
	return dropped, left, nil
}
