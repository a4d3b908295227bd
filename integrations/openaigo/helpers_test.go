package openaigo_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/memory"
	_ "github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func TestMain(m *testing.M) {
	if os.Getenv(envApprovalChild) != "" {
		// A crash-loop child is killed mid-run: leak checks mean nothing there.
		os.Exit(m.Run())
	}
	testservers.Main(m) // stops the test servers, then checks for leaked goroutines
}

// fixtureLines returns testdata/items.jsonl's lines, byte for byte (split
// on '\n' only: a line may hold U+2028).
func fixtureLines(t testing.TB) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "items.jsonl"))
	require.NoError(t, err)
	var out [][]byte
	for line := range bytes.SplitSeq(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		out = append(out, line)
	}
	return out
}

// fixtures returns the fixture items.
func fixtures(t testing.TB) []session.Item {
	t.Helper()
	var out []session.Item
	for i, line := range fixtureLines(t) {
		it, err := session.NewItem(line)
		require.NoError(t, err, "fixture line %d", i+1)
		out = append(out, it)
	}
	return out
}

// texts returns the items' bytes as strings.
func texts(items []session.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Bytes())
	}
	return out
}

// compact returns b with insignificant white space removed.
func compact(t testing.TB, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, b))
	return buf.String()
}

// backend opens sessions of one kind of store; reopen returns a fresh
// handle on the same data (a process restart), or the same store when the
// data lives in the process.
type backend struct {
	name string
	open func(t testing.TB) (sess func(id string) session.Session, reopen func() func(id string) session.Session)
}

func sqliteURL(t testing.TB) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "agent.db")
}

// openURL opens dsn and returns its session function, closing the store
// at the end of the test.
func openURL(t testing.TB, dsn string, wrap func(session.Session) session.Session) func(id string) session.Session {
	t.Helper()
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return func(id string) session.Session {
		s, err := st.Session(id)
		require.NoError(t, err)
		if wrap != nil {
			s = wrap(s)
		}
		return s
	}
}

func encryptedWrap(t testing.TB) func(session.Session) session.Session {
	return func(s session.Session) session.Session {
		e, err := encrypted.New(s, encrypted.Options{Keys: []encrypted.Key{{Secret: "correct horse battery staple"}}})
		require.NoError(t, err)
		return e
	}
}

func backends() []backend {
	onFile := func(wrap func(t testing.TB) func(session.Session) session.Session) func(t testing.TB) (func(string) session.Session, func() func(string) session.Session) {
		return func(t testing.TB) (func(string) session.Session, func() func(string) session.Session) {
			dsn := sqliteURL(t)
			var w func(session.Session) session.Session
			if wrap != nil {
				w = wrap(t)
			}
			return openURL(t, dsn, w), func() func(string) session.Session { return openURL(t, dsn, w) }
		}
	}
	return []backend{
		{"memory", func(t testing.TB) (func(string) session.Session, func() func(string) session.Session) {
			st := memory.New(memory.Options{})
			f := func(id string) session.Session {
				s, err := st.Session(id)
				require.NoError(t, err)
				return s
			}
			return f, func() func(string) session.Session { return f }
		}},
		{"sqlite", onFile(nil)},
		{"encrypted+sqlite", onFile(encryptedWrap)},
	}
}

// everyBackend is backends() and the networked adapters (Redis, Redis
// Cluster, the Mongo-wire server, PostgreSQL) on real servers on loopback,
// for the tests that must hold on every adapter.
func everyBackend() []backend {
	out := backends()
	for _, b := range storetest.Backends() {
		if b.Name == "memory" || b.Name == "sqlite" {
			continue
		}
		out = append(out, backend{b.Name, func(t testing.TB) (func(string) session.Session, func() func(string) session.Session) {
			dsn := b.URL(t)
			return openURL(t, dsn, nil), func() func(string) session.Session { return openURL(t, dsn, nil) }
		}})
	}
	return out
}

// readLines reads a file of lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	require.NoError(t, sc.Err())
	return out
}

// memSession returns a session of a new memory store.
func memSession(t testing.TB, id string) session.Session {
	t.Helper()
	s, err := memory.New(memory.Options{}).Session(id)
	require.NoError(t, err)
	return s
}

// runsLeft returns the names of the checkpoints of s that hold a run in
// progress: every one but an idle one (what Finish leaves).
func runsLeft(t testing.TB, s session.Session) []string {
	t.Helper()
	cs := s.(session.CheckpointStore)
	names, err := cs.ListCheckpoints(context.Background())
	if err != nil {
		t.Fatalf("list checkpoints: %v", err)
	}
	var left []string
	for _, n := range names {
		doc, _, err := cs.LoadCheckpoint(context.Background(), n)
		if err != nil || !runstate.Idle(doc) {
			left = append(left, n)
		}
	}
	return left
}
