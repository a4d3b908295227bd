package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
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

// lostOutcome is what one call did under a lost reply.
type lostOutcome int

const (
	tookUnknown lostOutcome = iota // took effect, ErrOutcomeUnknown: as promised
	tookPlain                      // took effect, error without ErrOutcomeUnknown: the bug
	tookNil                        // took effect, no error: the adapter recovered the outcome
	notUnknown                     // did not happen, ErrOutcomeUnknown: allowed
	notPlain                       // did not happen, plain error: allowed
	notNil                         // did not happen, no error: wrong
	notInjected                    // the proxy saw no matching request
	nOutcomes
)

var lostOutcomeNames = [nOutcomes]string{"took+unknown", "took+PLAIN", "took+nil", "none+unknown", "none+plain", "none+nil", "not-injected"}

// bad: took+nil is not (the adapter read the outcome back), and is noted.
func (o lostOutcome) bad() bool {
	return o == tookPlain || o == notNil || o == notInjected
}

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

var (
	lostBase  = []session.Item{session.MustItem(`{"n":1}`), session.MustItem(`{"n":2}`)}
	lostBatch = []session.Item{session.MustItem(`{"new":1}`), session.MustItem(`{"new":2}`)}
	lostOld   = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
)

func lostSetupBase(t *testing.T, st *Store, id string) {
	ctx := context.Background()
	s, err := st.Session(id)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, lostBase))
	_, err = s.SaveCheckpoint(ctx, "c", []byte(`{"v":1}`), 0)
	require.NoError(t, err)
}

// on runs f on the session id of st.
func on(f func(ctx context.Context, s *Session, version string) error) func(context.Context, *Store, string, string) error {
	return func(ctx context.Context, st *Store, id, version string) error {
		s, err := st.Session(id)
		if err != nil {
			return err
		}
		return f(ctx, s, version)
	}
}

func pop(ctx context.Context, s *Session, _ string) error {
	_, _, err := s.PopItem(ctx)
	return err
}

var lostOps = []lostOp{
	{name: "AddItems", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) })},
	{name: "AddItems(new session)", setup: func(*testing.T, *Store, string) {},
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.AddItems(ctx, lostBatch) })},
	{name: "AddItemsOnce", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, err := s.AddItemsOnce(ctx, "op-1", lostBatch)
			return err
		})},
	{name: "PopItem", setup: lostSetupBase, do: on(pop)},
	{name: "PopItem(slow path)", setup: func(t *testing.T, st *Store, id string) {
		// A corrupt newest row sends the pop to its transaction, which
		// deletes the newest valid item and ends with a COMMIT.
		lostSetupBase(t, st, id)
		require.NoError(t, st.AppendRaw(context.Background(), id, []byte(`not json`)))
	}, do: on(pop)},
	{name: "Clear", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.Clear(ctx) })},
	{name: "ReplaceItems", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.ReplaceItems(ctx, lostBatch) })},
	{name: "ReplaceItemsIf", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, v string) error { return s.ReplaceItemsIf(ctx, v, lostBatch) })},
	{name: "SaveCheckpoint", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, err := s.SaveCheckpoint(ctx, "c", []byte(`{"v":2}`), 1)
			return err
		})},
	{name: "SaveCheckpoint(AnyVersion)", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, err := s.SaveCheckpoint(ctx, "c", []byte(`{"v":2}`), session.AnyVersion)
			return err
		})},
	{name: "AppendWithCheckpoint", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			_, err := s.AppendWithCheckpoint(ctx, lostBatch, "c", []byte(`{"v":2}`), 1)
			return err
		})},
	{name: "DeleteCheckpoint", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error { return s.DeleteCheckpoint(ctx, "c", 1) })},
	{name: "DeleteCheckpoint(AnyVersion)", setup: lostSetupBase,
		do: on(func(ctx context.Context, s *Session, _ string) error {
			return s.DeleteCheckpoint(ctx, "c", session.AnyVersion)
		})},
	{name: "RemoveSession", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error { return st.RemoveSession(ctx, id) }},
	{name: "AppendRaw", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			return st.AppendRaw(ctx, id, []byte(`{"raw":1}`))
		}},
	{name: "SetSessionTimes", setup: lostSetupBase,
		do: func(ctx context.Context, st *Store, id, _ string) error {
			var ts adapters.Timestamps = &urlStore{st: st}
			return ts.SetSessionTimes(ctx, id, adapters.SessionTimes{Created: lostOld})
		}},
}

// lostReps is how often each write loses its commit's reply.
const lostReps = 3

// lostTable collects the outcomes, for the log (and docs/reliability.md).
type lostTable struct {
	mu     sync.Mutex
	rows   map[string]*[nOutcomes]int
	commit map[string]string // the commit request found by the dry run
}

func (lt *lostTable) add(key string, o lostOutcome) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.rows[key] == nil {
		lt.rows[key] = new([nOutcomes]int)
	}
	lt.rows[key][o]++
}

func (lt *lostTable) String() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	keys := make([]string, 0, len(lt.rows))
	for k := range lt.rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| operation | commit |")
	for _, n := range lostOutcomeNames {
		b.WriteString(" " + n + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", int(nOutcomes)) + "\n")
	var total [nOutcomes]int
	for _, k := range keys {
		b.WriteString("| " + k + " | " + lt.commit[k] + " |")
		for i, n := range lt.rows[k] {
			total[i] += n
			fmt.Fprintf(&b, " %d |", n)
		}
		b.WriteString("\n")
	}
	b.WriteString("| all | |")
	for _, n := range total {
		fmt.Fprintf(&b, " %d |", n)
	}
	b.WriteString("\n")
	return b.String()
}

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

// findCommit runs op once without a fault and returns the ordinal of the
// session's request after whose reply its rows first differ (read in the
// proxy's goroutine as each next request arrives, and after the call),
// and how many requests it sent.
func findCommit(t *testing.T, p *faultproxy.Proxy, direct, proxied *Store, op lostOp, id string) (int, int) {
	t.Helper()
	ctx := context.Background()
	op.setup(t, direct, id)
	version := historyVersion(t, direct, id)
	initial := snapshot(t, direct, id)
	own := sessionRequest(storedID(id))
	var mu sync.Mutex
	var states []lostSnapshot // states[i]: before request i+1 was forwarded
	var dumpErr error
	p.Set(faultproxy.LoseReply, func(req []byte) bool {
		if own(req) {
			s, err := dump(direct, id)
			mu.Lock()
			states = append(states, s)
			dumpErr = cmp.Or(dumpErr, err)
			mu.Unlock()
		}
		return false // count, never inject
	})
	err := op.do(ctx, proxied, id, version)
	p.Set(faultproxy.None, nil)
	require.NoError(t, err, "dry run of %s", op.name)
	mu.Lock()
	defer mu.Unlock()
	require.NoError(t, dumpErr)
	states = append(states, snapshot(t, direct, id))
	for i := 1; i < len(states); i++ {
		if states[i] != initial {
			return i, len(states) - 1
		}
	}
	t.Fatalf("%s changed nothing", op.name)
	return 0, 0
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
	table := &lostTable{rows: map[string]*[nOutcomes]int{}, commit: map[string]string{}}
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
			table.mu.Lock()
			table.commit[op.name] = fmt.Sprintf("%d of %d", commit, total)
			table.mu.Unlock()
			for rep := range lostReps {
				id := fmt.Sprintf("lost-%s-%d", slug, rep)
				op.setup(t, direct, id)
				version := historyVersion(t, direct, id)
				before := snapshot(t, direct, id)
				own := sessionRequest(storedID(id))
				var seen atomic.Int32
				n0 := p.Injected.Load()
				p.Once(faultproxy.LoseReply, func(req []byte) bool {
					return own(req) && seen.Add(1) == int32(commit)
				})
				callErr := op.do(ctx, proxied, id, version)
				p.Set(faultproxy.None, nil)
				injected := p.Injected.Load() - n0
				after := snapshot(t, direct, id)
				took := before != after
				unknown := errors.Is(callErr, session.ErrOutcomeUnknown)
				var o lostOutcome
				switch {
				case injected != 1:
					o = notInjected
				case took && callErr == nil:
					o = tookNil
				case took && unknown:
					o = tookUnknown
				case took:
					o = tookPlain
				case callErr == nil:
					o = notNil
				case unknown:
					o = notUnknown
				default:
					o = notPlain
				}
				table.add(op.name, o)
				switch {
				case o.bad():
					t.Errorf("%s (rep %d, commit = request %d of %d): %s (faults injected: %d), error: %v",
						op.name, rep, commit, total, lostOutcomeNames[o], injected, callErr)
				case o == tookNil:
					t.Logf("%s (rep %d): took effect and reported no error: the outcome was recovered", op.name, rep)
				}
			}
		})
	}
}
