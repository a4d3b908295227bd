package mongo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/session"
)

// TestRemoveSessionLeavesNoTrace: after Clear a session document and an
// empty marker stay (Python's clear_session keeps the counters);
// RemoveSession deletes every document of the session and no other.
func TestRemoveSessionLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t, Options{})
	for _, id := range []string{"gone", "kept"} {
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`), session.MustItem(`{"n":2}`)}))
	}
	s, err := st.Session("gone")
	require.NoError(t, err)
	require.NoError(t, s.Clear(ctx))
	db := st.Client().Database(st.Database())
	count := func(coll, id string) int64 {
		n, err := db.Collection(coll).CountDocuments(ctx, bson.D{{Key: "session_id", Value: id}})
		require.NoError(t, err)
		return n
	}
	require.Positive(t, count("agent_sessions", "gone"), "Clear keeps the session document")
	require.NoError(t, st.RemoveSession(ctx, "gone"))
	require.Zero(t, count("agent_sessions", "gone"))
	require.Zero(t, count("agent_messages", "gone"))
	require.Positive(t, count("agent_messages", "kept"), "other sessions are untouched")
	items, err := s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, items)
}
