package crossmodule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/otelsession"
	"github.com/agentsessions/sessions/session"
)

func TestMain(m *testing.M) {
	testservers.Main(m) // checks for leaked goroutines
}

// fixturesFile is integrations/openaigo's item fixtures, read where they
// are kept so that there is one copy.
var fixturesFile = filepath.Join("..", "..", "..", "integrations", "openaigo", "testdata", "items.jsonl")

// TestOpenaigoOverOtelsession is integrations/openaigo's fixture round trip
// (TestFixtureRoundTrip) on a SQLite session wrapped by otelsession, with
// and without a recording tracer: a third of the fixtures go in as
// openai-go params (param.Override), a third as raw JSON, the rest as a
// response's output items decoded by openai-go, and all are read back
// byte for byte from the same handle and from a reopened store.
func TestOpenaigoOverOtelsession(t *testing.T) {
	b, err := os.ReadFile(fixturesFile)
	require.NoError(t, err)
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) // '\n' only: a line may hold U+2028
	require.Greater(t, len(lines), 3)

	var reply []byte // the next response body
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	defer api.Close()
	client := openai.NewClient(option.WithBaseURL(api.URL+"/v1/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	for _, tc := range []struct {
		name      string
		recording bool
	}{{"global providers", false}, {"recording tracer", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := "sqlite://" + filepath.Join(t.TempDir(), "agent.db")
			spans := tracetest.NewSpanRecorder()
			opts := otelsession.Options{Backend: "sqlite"}
			if tc.recording {
				opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			}
			open := func() session.Session {
				st, err := adapters.Open(ctx, dsn)
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.Close() })
				s, err := st.Session("fixtures")
				require.NoError(t, err)
				return otelsession.Wrap(s, opts)
			}

			h := openaigo.New(open(), openaigo.Options{})
			third := len(lines) / 3
			var params []responses.ResponseInputItemUnionParam
			for _, l := range lines[:third] {
				params = append(params, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(l)))
			}
			require.NoError(t, h.AddInput(ctx, params...))
			var raws []json.RawMessage
			for _, l := range lines[third : 2*third] {
				raws = append(raws, json.RawMessage(l))
			}
			require.NoError(t, h.AddJSON(ctx, raws...))
			out := lines[2*third:]
			reply = []byte(`{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[` + string(bytes.Join(out, []byte(","))) + `]}`)
			resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5"})
			require.NoError(t, err)
			require.Len(t, resp.Output, len(out))
			require.NoError(t, h.AddResponse(ctx, resp))

			want := make([]string, len(lines))
			for i, l := range lines {
				want[i] = string(l)
			}
			got, err := session.All(ctx, h.Session())
			require.NoError(t, err)
			require.Equal(t, want, texts(got), "every fixture byte for byte")
			again, err := session.All(ctx, open())
			require.NoError(t, err)
			require.Equal(t, want, texts(again), "every fixture byte for byte after a reopen")

			if tc.recording {
				names := map[string]int{}
				for _, s := range spans.Ended() {
					names[s.Name()]++
				}
				require.Equal(t, 3, names["session.add_items"], "one span per History append: %v", names)
				require.Positive(t, names["session.items"], "the reads were traced: %v", names)
			} else {
				require.Empty(t, spans.Ended())
			}
			t.Logf("%s: %d/%d fixtures byte-identical (same handle and reopened)", tc.name, len(got), len(lines))
		})
	}
}

func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Bytes())
	}
	return out
}
