package mongo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

var _ adapters.PageLister = (*urlStore)(nil)

// ListSessionsPage lists at most limit of the sessions that have a session
// document or a checkpoint, in the server's order of their ids (bytewise),
// after cursor (adapters.PageLister): the cursor is the last id listed.
//
// Saving a checkpoint writes no session document (the sessions collection
// is the Python SDK's MongoDBSession layout, and a checkpoint is not a
// conversation), so a session that holds only a checkpoint is found in the
// checkpoints collection. Each page is one find on the sessions
// collection's unique session_id index and one or more finds on the
// checkpoints collection's {session_id, name, version} index (the
// committed versions that are not tombstones), each reading at most limit
// documents: the distinct ids of the two are merged in order and the
// first limit of them listed. A checkpoint document that is about to be
// deleted (an older version, an expired one) may list a session that
// reads as holding nothing, as a session document removed between the
// listing and the read does.
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if s.st.closed.Load() {
		return nil, "", session.ErrClosed
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("mongo: list sessions: limit %d is not positive", limit)
	}
	fromSessions, moreSessions, err := distinctIDsAfter(ctx, s.st.sessions, nil, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("mongo: list sessions: %w", err)
	}
	fromCkpts, moreCkpts, err := distinctIDsAfter(ctx, s.st.checkpoints,
		bson.D{committed, {Key: fCkptDeleted, Value: bson.D{{Key: "$ne", Value: true}}}}, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("mongo: list sessions: checkpoints: %w", err)
	}
	ids := mergeIDs(fromSessions, fromCkpts)
	more := moreSessions || moreCkpts
	if len(ids) > limit {
		ids, more = ids[:limit], true
	}
	next := ""
	if more && len(ids) > 0 {
		next = ids[len(ids)-1]
	}
	return ids, next, nil
}

// distinctIDsAfter returns, in order, the first limit distinct string
// session_id values after cursor of the documents of coll that match
// filter, and whether there may be more. It reads at most limit documents
// per find, and finds again after the last id it read while it has fewer
// than limit ids and the find returned limit documents (a session holding
// several documents takes several of them).
func distinctIDsAfter(ctx context.Context, coll *mongodrv.Collection, filter bson.D, cursor string, limit int) ([]string, bool, error) {
	ids := make([]string, 0, min(limit, 1024))
	after := cursor
	for len(ids) < limit {
		f := append(bson.D{{Key: fSessionID, Value: bson.D{{Key: "$gt", Value: after}}}}, filter...)
		opts := options.Find().
			SetSort(bson.D{{Key: fSessionID, Value: 1}}).
			SetLimit(int64(limit)).
			SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: fSessionID, Value: 1}})
		cur, err := coll.Find(ctx, f, opts)
		if err != nil {
			return nil, false, err
		}
		seen, last := 0, ""
		for cur.Next(ctx) {
			seen++
			// $gt on a string matches strings only (BSON type bracketing).
			v, ok := cur.Current.Lookup(fSessionID).StringValueOK()
			if !ok {
				continue
			}
			last = v
			if len(ids) == 0 || v != ids[len(ids)-1] {
				ids = append(ids, v)
			}
		}
		err = cur.Err()
		_ = cur.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, false, err
		}
		if seen < limit || last == "" {
			return ids, false, nil
		}
		after = last
	}
	return ids, true, nil
}

// mergeIDs merges two sorted lists of distinct ids into one, each id once.
func mergeIDs(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// distinctIDs returns the distinct string session_id values of the
// documents of coll that match filter, sorted: one distinct command. The
// driver adds maxTimeMS to it when ctx has a deadline, which FerretDB v1
// refuses for distinct (FailedToParse, "unknown field maxTimeMS"): the ids
// are then read with a find (which it accepts), every matching document's
// session_id. The command's error is checked before decoding, since the
// driver's DistinctResult.Decode does not return it (it reports an empty
// reply instead).
func distinctIDs(ctx context.Context, coll *mongodrv.Collection, filter bson.D) ([]string, error) {
	res := coll.Distinct(ctx, fSessionID, filter)
	err := res.Err()
	if err == nil {
		var ids []string
		if err := res.Decode(&ids); err != nil {
			return nil, err
		}
		sort.Strings(ids)
		return ids, nil
	}
	var ce mongodrv.CommandError
	if !errors.As(err, &ce) || ce.Code != 9 || !strings.Contains(ce.Message, "maxTimeMS") {
		return nil, err
	}
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: fSessionID, Value: 1}}))
	if err != nil {
		return nil, err
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	seen := map[string]bool{}
	ids := []string{}
	for cur.Next(ctx) {
		if v, ok := cur.Current.Lookup(fSessionID).StringValueOK(); ok && !seen[v] {
			seen[v] = true
			ids = append(ids, v)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, err
	}
	sort.Strings(ids)
	return ids, nil
}
