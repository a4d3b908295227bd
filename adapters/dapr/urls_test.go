package dapr_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/dapr"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	d := testservers.Daprd(t)
	st, err := adapters.Open(ctx, "dapr://"+d.GRPCAddr+"/"+d.StoreName+"?consistency=strong&ttl=1h&max_attempts=7")
	require.NoError(t, err)
	defer st.Close()
	require.Equal(t, session.Caps(session.CapLatest, session.CapReplace, session.CapVersionedReplace), st.Declared())
	_, ok := st.(driver.RawAppender)
	require.True(t, ok)
	id := uniqueID(t, "url")
	s, err := st.Session(id)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, itemsOf(t, `{"a":1}`)))
	c := newClient(t, d.GRPCAddr)
	ds, err := newStore(t, c, dapr.Options{StoreName: d.StoreName}).Session(id)
	require.NoError(t, err)
	items, err := ds.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{`{"a":1}`}, texts(items), "the URL store writes the same keys")
	require.NoError(t, s.Clear(ctx))

	for _, bad := range []string{
		"dapr:///" + d.StoreName,
		"dapr://" + d.GRPCAddr,
		"dapr://" + d.GRPCAddr + "/",
		"dapr://" + d.GRPCAddr + "/a/b",
		"dapr://user:secret-pw@" + d.GRPCAddr + "/" + d.StoreName,
		"dapr://" + d.GRPCAddr + "/" + d.StoreName + "?consistency=linearizable",
		"dapr://" + d.GRPCAddr + "/" + d.StoreName + "?ttl=1500ms",
		"dapr://" + d.GRPCAddr + "/" + d.StoreName + "?max_attempts=-1",
		"dapr://" + d.GRPCAddr + "/" + d.StoreName + "?token=secret-tok",
	} {
		_, err := adapters.Open(ctx, bad)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, bad)
		require.NotContains(t, err.Error(), "secret-", "no secret in the error of %s", bad)
		require.False(t, strings.Contains(err.Error(), "secret"), bad)
	}
}
