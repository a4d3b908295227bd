package openaigo_test

import (
	"context"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

var _ legacy.Codec[responses.ResponseInputItemUnionParam] = openaigo.Codec{}

// unionLog is a session of github.com/nlpodyssey/openai-agents-go's shape
// over its item type, openai-go's input item union.
type unionLog struct {
	mu    sync.Mutex
	items []responses.ResponseInputItemUnionParam
}

func (u *unionLog) SessionID(context.Context) string { return "union" }
func (u *unionLog) GetItems(_ context.Context, limit int) ([]responses.ResponseInputItemUnionParam, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if limit <= 0 || limit > len(u.items) {
		limit = len(u.items)
	}
	return append([]responses.ResponseInputItemUnionParam(nil), u.items[len(u.items)-limit:]...), nil
}
func (u *unionLog) AddItems(_ context.Context, items []responses.ResponseInputItemUnionParam) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.items = append(u.items, items...)
	return nil
}
func (u *unionLog) PopItem(context.Context) (*responses.ResponseInputItemUnionParam, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.items) == 0 {
		return nil, nil
	}
	last := u.items[len(u.items)-1]
	u.items = u.items[:len(u.items)-1]
	return &last, nil
}
func (u *unionLog) ClearSession(context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.items = nil
	return nil
}

// TestLegacyCodecs: legacy's FromLimitSession over the union, with the
// JSONCodec its documentation used to suggest and with openaigo.Codec.
func TestLegacyCodecs(t *testing.T) {
	ctx := context.Background()
	items := fixtures(t)

	// JSONCodec: the items the union cannot decode fail the batch; one by
	// one, each such item is refused, and what is stored comes back changed.
	s := legacy.FromLimitSession[responses.ResponseInputItemUnionParam](&unionLog{}, nil)
	require.Error(t, s.AddItems(ctx, items), "a batch holding a plain user message")
	refused := 0
	for _, it := range items {
		if s.AddItems(ctx, []session.Item{it}) != nil {
			refused++
		}
	}
	got, err := s.Items(ctx)
	require.NoError(t, err)
	same := 0
	for _, g := range got {
		for _, it := range items {
			if g.String() == it.String() {
				same++
				break
			}
		}
	}
	t.Logf("JSONCodec over the union: %d of %d fixtures refused, %d stored, %d of them read back byte for byte", refused, len(items), len(got), same)
	require.Positive(t, refused)

	// A union-typed caller reading one of our sessions through JSONCodec
	// (ToLimitSession): the items the union cannot decode are reported as
	// corrupt and hidden; the others come back as the union re-encodes them.
	ours := memSession(t, "ours")
	require.NoError(t, session.Append(ctx, ours, items))
	c := &driver.CorruptLog{}
	ls := legacy.ToLimitSessionWith(ours, legacy.LimitOptions[responses.ResponseInputItemUnionParam]{OnCorrupt: c.Handler()})
	read, err := ls.GetItems(ctx, 0)
	require.NoError(t, err)
	reencoded, err := openaigo.ItemsOf(read)
	require.NoError(t, err)
	idsLost := 0
	for _, it := range items {
		if it.Type() == "message" && it.Role() == "assistant" && it.ID() != "" {
			idsLost++
			for _, r := range reencoded {
				if r.Type() == "message" && r.ID() == it.ID() {
					idsLost--
					break
				}
			}
		}
	}
	t.Logf("JSONCodec, a union-typed reader of our session: %d of %d items returned, %d hidden as corrupt records, %d assistant message ids gone",
		len(read), len(items), len(c.Reports("ours")), idsLost)
	require.Len(t, c.Reports("ours"), len(items)-len(read))
	require.Positive(t, idsLost)

	// openaigo.Codec: every fixture, both ways, byte for byte.
	s = legacy.FromLimitSession[responses.ResponseInputItemUnionParam](&unionLog{}, openaigo.Codec{})
	require.NoError(t, s.AddItems(ctx, items))
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, texts(items), texts(got))
	latest, err := session.Latest(ctx, s, 5)
	require.NoError(t, err)
	require.Equal(t, texts(items[len(items)-5:]), texts(latest))
	t.Logf("openaigo.Codec over the union: %d of %d fixtures stored and read back byte for byte", len(got), len(items))

	// The other direction: a union-typed caller over one of our sessions.
	ls = legacy.ToLimitSession[responses.ResponseInputItemUnionParam](memSession(t, "to"), openaigo.Codec{})
	require.NoError(t, ls.AddItems(ctx, openaigo.InputParams(items)))
	params, err := ls.GetItems(ctx, 0)
	require.NoError(t, err)
	back2, err := openaigo.ItemsOf(params)
	require.NoError(t, err)
	require.Equal(t, texts(items), texts(back2))
}
