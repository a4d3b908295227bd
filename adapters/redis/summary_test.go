package redis

import (
	"context"
	"fmt"
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

// TestHistoryVersionInClient: the version a page's summary computes of the
// records it read is the one the server's script computes (HistoryVersion)
// of the same history: empty, unreadable records, records holding ':' and
// digits (the length prefix keeps them apart), multi-byte and invalid
// UTF-8.
func TestHistoryVersionInClient(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, testservers.Redis(t), Options{KeyPrefix: uniquePrefix(t)})
	require.NoError(t, err)
	defer st.Close()
	for i, records := range [][]string{
		{},
		{`{"n":1}`},
		{`{"n":1}`, `{"n":2}`, `{"n":3`},
		{"1:", "2", "3:4"},
		{"12", ":3"},
		{`{"t":"é€😀"}`, "\xff\xfe", ""},
	} {
		s, err := st.Session(fmt.Sprintf("v%d", i))
		require.NoError(t, err)
		if len(records) > 0 {
			args := make([]any, len(records))
			for j, r := range records {
				args[j] = r
			}
			require.NoError(t, st.client.RPush(ctx, s.Keys()[0], args...).Err())
		}
		want, err := s.HistoryVersion(ctx)
		require.NoError(t, err)
		raws, err := st.client.LRange(ctx, s.Keys()[0], 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, want, historyVersion(raws), "records %q", records)
		require.NoError(t, st.RemoveSession(ctx, s.id))
	}
}

// TestSessionsExist: a session exists exactly when its history holds a
// record, readable or not; an id never written, a cleared one and an id the
// layout refuses do not.
func TestSessionsExist(t *testing.T) {
	ctx := context.Background()
	st, err := adapters.Open(ctx, testservers.Redis(t)+"?key_prefix="+url.QueryEscape(uniquePrefix(t)))
	require.NoError(t, err)
	defer st.Close()
	write := func(id string, raws ...string) {
		s, err := st.Session(id)
		require.NoError(t, err)
		h := s.(*Session)
		for _, r := range raws {
			require.NoError(t, h.st.client.RPush(ctx, h.keys[0], r).Err())
		}
	}
	write("items", `{"n":1}`)
	write("unreadable", `{"n":`)
	write("cleared", `{"n":1}`)
	c, err := st.Session("cleared")
	require.NoError(t, err)
	require.NoError(t, c.Clear(ctx))
	ex := st.(interface {
		SessionsExist(context.Context, []string) ([]bool, error)
	})
	got, err := ex.SessionsExist(ctx, []string{"never", "items", "cleared", "unreadable", "items", ""})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true, false, true, true, false}, got)
	got, err = ex.SessionsExist(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}
