package redis

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// A damaged checkpoint reads in a page's summary as LoadCheckpoint reads
// it: listed, with LoadCheckpoint's error; a sound one beside it as it is.
func TestSummarizeSessionsDamagedCheckpoint(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, testservers.Redis(t)+"?key_prefix="+url.QueryEscape(uniquePrefix(t)))
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session("a*[?")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"n":1}`)}))
	_, err = s.(session.CheckpointStore).SaveCheckpoint(ctx, "good", []byte(`{"x":1}`), 0)
	require.NoError(t, err)
	h := s.(*Session)
	require.NoError(t, h.st.client.HSet(ctx, h.CheckpointKey(), versionField+"bad", "zero").Err())
	require.NoError(t, h.st.client.HSet(ctx, h.CheckpointKey(), versionField+"nodoc", "3").Err())

	sums, err := st.(adapters.Summarizer).SummarizeSessions(ctx, []string{"a*[?"}, nil)
	require.NoError(t, err)
	names, err := s.(session.CheckpointStore).ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"bad", "good", "nodoc"}, names)
	require.Len(t, sums[0].Checkpoints, 3)
	for i, n := range names {
		doc, v, lerr := s.(session.CheckpointStore).LoadCheckpoint(ctx, n)
		c := sums[0].Checkpoints[i]
		require.Equal(t, n, c.Name)
		if lerr != nil {
			require.EqualError(t, c.Err, lerr.Error(), n)
			continue
		}
		require.NoError(t, c.Err)
		require.Equal(t, doc, c.Document)
		require.Equal(t, v, c.Version)
	}
	require.Equal(t, 1, sums[0].Items)
}
