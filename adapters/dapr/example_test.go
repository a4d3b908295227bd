package dapr_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/dapr"
	"github.com/agentsessions/sessions/internal/testkit/capture"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// Example keeps a conversation in a Dapr state store, where a Python agent's
// DaprSession reads it too. It needs a sidecar: set DAPR_GRPC_ADDRESS
// (host:port of daprd's gRPC API) and DAPR_STATE_STORE. TestExample runs
// it against a test sidecar and checks its output.
func Example() {
	ctx := context.Background()
	addr := os.Getenv("DAPR_GRPC_ADDRESS")
	if addr == "" {
		addr = "localhost:50001"
	}
	st, err := dapr.Open(ctx, addr, dapr.Options{
		StoreName:   os.Getenv("DAPR_STATE_STORE"),
		Consistency: dapr.ConsistencyStrong,
	})
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer st.Close()

	s, err := st.Session("user-123")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Clear(ctx) // start the example afresh

	turn := []session.Item{
		session.MustItem(`{"role":"user","content":"What's the capital of France?"}`),
		session.MustItem(`{"role":"assistant","content":"Paris."}`),
	}
	if err := session.Append(ctx, s, turn); err != nil { // one batch, one conditional save
		fmt.Println(err)
		return
	}
	latest, err := session.Latest(ctx, s, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("latest:", latest[0])

	left, ok, err := session.Pop(ctx, s)
	fmt.Println("popped:", left, ok, err)

	all, _ := session.All(ctx, s)
	fmt.Println("items left:", len(all))
	messages, metadata := s.Keys()
	fmt.Println("keys:", messages, metadata)
	_ = s.Clear(ctx)
}

// TestExample runs Example against a test sidecar and checks what it
// prints, as an "// Output:" comment would if a sidecar were always there.
func TestExample(t *testing.T) {
	d := testservers.Daprd(t)
	t.Setenv("DAPR_GRPC_ADDRESS", d.GRPCAddr)
	t.Setenv("DAPR_STATE_STORE", d.StoreName)
	require.Equal(t, `latest: {"role":"assistant","content":"Paris."}
popped: {"role":"assistant","content":"Paris."} true <nil>
items left: 1
keys: user-123:messages user-123:metadata
`, capture.Stdout(t, Example))
}
