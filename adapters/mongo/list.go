package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

var _ adapters.PageLister = (*urlStore)(nil)

// ListSessionsPage lists at most limit of the sessions that have a session
// document, in the server's order of their ids, after cursor
// (adapters.PageLister): the cursor is the last id listed. Each page is
// one find on the unique session_id index.
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if s.st.closed.Load() {
		return nil, "", session.ErrClosed
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("mongo: list sessions: limit %d is not positive", limit)
	}
	filter := bson.D{{Key: fSessionID, Value: bson.D{{Key: "$gt", Value: cursor}}}}
	opts := options.Find().
		SetSort(bson.D{{Key: fSessionID, Value: 1}}).
		SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: fSessionID, Value: 1}})
	cur, err := s.st.sessions.Find(ctx, filter, opts)
	if err != nil {
		return nil, "", fmt.Errorf("mongo: list sessions: %w", err)
	}
	defer cur.Close(ctx)
	ids := make([]string, 0, min(limit, 1024))
	seen := 0
	for cur.Next(ctx) {
		seen++
		// $gt on a string matches strings only (BSON type bracketing).
		if v, ok := cur.Current.Lookup(fSessionID).StringValueOK(); ok {
			ids = append(ids, v)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, "", fmt.Errorf("mongo: list sessions: %w", err)
	}
	next := ""
	if seen == limit && len(ids) > 0 {
		next = ids[len(ids)-1]
	}
	return ids, next, nil
}
