package postgres

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/lostreply"
	"github.com/agentsessions/sessions/session"
)

// Lost replies (issue 36, item 1), as adapters/redis/lostreply_test.go
// does it for Redis. A faultproxy.Proxy sits between a Store and the
// server; a second Store reads the same tables directly. For each write,
// a dry run (no fault) finds the write's commit: the request of the
// session (one naming its id, or a COMMIT) after whose reply the
// session's rows, read directly, first differ. Then, on fresh sessions,
// the proxy lets that request through, waits for the server's reply (the
// transaction has committed) and closes the connection instead of
// forwarding it. The call must then return an error wrapping
// session.ErrOutcomeUnknown, or have written nothing.

// lostSnapshot is every row the Store holds for a session, read directly.
type lostSnapshot string

// snapshot dumps the session's rows from the four tables, past the proxy.
func snapshot(t *testing.T, direct *Store, id string) lostSnapshot {
	t.Helper()
	s, err := dump(direct, id)
	require.NoError(t, err)
	return s
}

// dump is snapshot's work; the proxy's goroutine calls it too.
func dump(direct *Store, id string) (lostSnapshot, error) {
	ctx := context.Background()
	sid := storedID(id)
	var b strings.Builder
	for _, q := range []string{
		`SELECT id::text || ':' || message_data FROM ` + direct.q.messages + ` WHERE session_id = $1 ORDER BY id`,
		`SELECT created_at::text || '/' || updated_at::text FROM ` + direct.q.sessions + ` WHERE session_id = $1`,
		`SELECT name || '@' || version::text || '=' || encode(document, 'hex') FROM ` + direct.q.ck.table + ` WHERE session_id = $1 ORDER BY name`,
		`SELECT operation_id FROM ` + direct.q.ops.table + ` WHERE session_id = $1 ORDER BY operation_id`,
	} {
		rows, err := direct.Pool().Query(ctx, q, sid)
		if err != nil {
			return "", err
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return "", err
			}
			b.WriteString(s + "\n")
		}
		if err := rows.Err(); err != nil {
			return "", err
		}
		b.WriteString("--\n")
	}
	return lostSnapshot(b.String()), nil
}

// lostOp is one write under a lost reply: setup prepares the session
// through the direct Store, do is the call through the proxy.
type lostOp struct {
	name  string
	setup func(t *testing.T, st *Store, id string)
	do    func(ctx context.Context, st *Store, id, version string) error
}

var lostOld = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// lostSetup runs a lostreply setup on the session id of st.
func lostSetup(setup func(context.Context, session.Session) error) func(*testing.T, *Store, string) {
	return func(t *testing.T, st *Store, id string) {
		s, err := st.Session(id)
		require.NoError(t, err)
		require.NoError(t, setup(context.Background(), s))
	}
}

// lostSetupBase gives the session id lostreply's base items and checkpoint.
var lostSetupBase = lostSetup(lostreply.SetupBase)

// lostOps are lostreply's writes (the common ones, and three more this
// adapter has), then the pop's slow path and the Store's own writes.
var lostOps = append(lostWrites("SaveCheckpoint(AnyVersion)", "AppendWithCheckpoint", "DeleteCheckpoint(AnyVersion)"),
	lostOp{name: "PopItem(slow path)", setup: func(t *testing.T, st *Store, id string) {
		// A corrupt newest row sends the pop to its transaction, which
		// deletes the newest valid item and ends with a COMMIT.
		lostSetupBase(t, st, id)
		require.NoError(t, st.AppendRaw(context.Background(), id, []byte(`not json`)))
	}, do: lostreply.On((*Store).Session, lostreply.PopItem)},
	lostOp{name: "RemoveSession", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error { return st.RemoveSession(ctx, id) }},
	lostOp{name: "AppendRaw", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			return st.AppendRaw(ctx, id, []byte(`{"raw":1}`))
		}},
	lostOp{name: "SetSessionTimes", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			var ts adapters.Timestamps = &urlStore{st: st}
			return ts.SetSessionTimes(ctx, id, adapters.SessionTimes{Created: lostOld})
		}},
)

// lostWrites are lostreply.Writes(extra...) as lostOps.
func lostWrites(extra ...string) (ops []lostOp) {
	for _, w := range lostreply.Writes(extra...) {
		ops = append(ops, lostOp{name: w.Name, setup: lostSetup(w.Setup), do: lostreply.On((*Store).Session, w.Do)})
	}
	return ops
}

// lostReps is how often each write loses its commit's reply.
const lostReps = 3

// sessionRequest reports whether a request belongs to the session sid:
// it names it (a Bind carries the arguments), or it is a COMMIT sent as a
// simple query (the transactions' end, which names nothing).
func sessionRequest(sid string) func([]byte) bool {
	return func(req []byte) bool {
		if bytes.Contains(req, []byte(sid)) {
			return true
		}
		return len(req) > 0 && req[0] == 'Q' && bytes.Contains(bytes.ToUpper(req), []byte("COMMIT"))
	}
}

// findCommit runs op once without a fault (lostreply.FindCommit) and
// returns the ordinal of the session's request after whose reply its
// rows first differ, and how many requests it sent.
func findCommit(t *testing.T, p *faultproxy.Proxy, direct, proxied *Store, op lostOp, id string) (int, int) {
	t.Helper()
	op.setup(t, direct, id)
	version := historyVersion(t, direct, id)
	return lostreply.FindCommit(t, p, op.name, sessionRequest(storedID(id)),
		func() (lostSnapshot, error) { return dump(direct, id) },
		func() error { return op.do(context.Background(), proxied, id, version) })
}

func historyVersion(t *testing.T, st *Store, id string) string {
	t.Helper()
	s, err := st.Session(id)
	require.NoError(t, err)
	v, err := s.HistoryVersion(context.Background())
	require.NoError(t, err)
	return v
}

// TestLostReplyOutcome loses the reply of every write's commit lostReps
// times and fails on any write that took effect and reported a plain
// error (or reported success and did nothing). The adapter has one
// layout (the Python SDK's SQLAlchemySession tables, whatever their
// names); the pop's two paths are both run.
func TestLostReplyOutcome(t *testing.T) {
	table := lostreply.NewTable("operation").WithCommit()
	t.Cleanup(func() { t.Logf("lost replies (postgres):\n%s", table) })
	ctx := context.Background()
	direct := openStore(t, Options{})
	u, err := url.Parse(serverURL(t))
	require.NoError(t, err)
	p, err := faultproxy.Start(u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	qs := u.Query()
	qs.Set("sslmode", "disable") // the proxy reads the requests
	u.RawQuery = qs.Encode()
	proxied, err := Open(ctx, u.String(), Options{Schema: direct.opts.Schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxied.Close() })

	for _, op := range lostOps {
		t.Run(strings.ReplaceAll(op.name, " ", "_"), func(t *testing.T) {
			slug := strings.NewReplacer(" ", "", "(", "", ")", "").Replace(op.name)
			commit, total := findCommit(t, p, direct, proxied, op, "lost-dry-"+slug)
			table.SetCommit(op.name, fmt.Sprintf("%d of %d", commit, total))
			for rep := range lostReps {
				id := fmt.Sprintf("lost-%s-%d", slug, rep)
				op.setup(t, direct, id)
				version := historyVersion(t, direct, id)
				before := snapshot(t, direct, id)
				injected, callErr := lostreply.LoseNth(p, sessionRequest(storedID(id)), commit,
					func() error { return op.do(ctx, proxied, id, version) })
				o := lostreply.Classify(before != snapshot(t, direct, id), injected == 1, callErr)
				table.Add(op.name, o)
				switch {
				case o.Bad():
					t.Errorf("%s (rep %d, commit = request %d of %d): %s (faults injected: %d), error: %v",
						op.name, rep, commit, total, o, injected, callErr)
				case o == lostreply.TookNil: // the adapter read the outcome back
					t.Logf("%s (rep %d): took effect and reported no error: the outcome was recovered", op.name, rep)
				}
			}
		})
	}
}
