package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/session"
)

// sharedScheme is a test-only scheme: sessionctltest://NAME is one
// in-process memory store per NAME, shared by every open (memory:// is a
// new store at every open, which sessionctl refuses to write to), so that
// a test and the command reach one store. sessionctltest-plain://NAME is
// the same store through sessions that hide the versioned-replace
// capability.
const sharedScheme, plainScheme = "sessionctltest", "sessionctltest-plain"

// noListScheme is the shared store without adapters.Lister.
const noListScheme = "sessionctltest-nolist"

var shared = struct {
	sync.Mutex
	stores map[string]*memory.Store
}{stores: map[string]*memory.Store{}}

type sharedOpener struct{ plain, noList bool }

func (o sharedOpener) OpenStoreURL(_ context.Context, u *url.URL, _ adapters.Options) (adapters.Store, error) {
	shared.Lock()
	st := shared.stores[u.Host]
	if st == nil {
		st = memory.New(memory.Options{})
		shared.stores[u.Host] = st
	}
	shared.Unlock()
	var base adapters.Store
	var err error
	if o.plain {
		base, err = adapters.NewStore(func(id string) (plainSession, error) {
			s, err := st.Session(id)
			return plainSession{s}, err
		}, nil)
	} else {
		base, err = adapters.NewStore(st.Session, nil)
	}
	if err != nil {
		return nil, err
	}
	if o.noList {
		return base, nil
	}
	return sharedStore{base, st}, nil
}

type sharedStore struct {
	adapters.Store
	st *memory.Store
}

func (s sharedStore) ListSessions(ctx context.Context) ([]string, error) {
	return s.st.ListSessions(ctx)
}

// plainSession is a session with the core interface and an unconditional
// replace only.
type plainSession struct{ s *memory.Session }

func (p plainSession) SessionID() string { return p.s.SessionID() }
func (p plainSession) Items(ctx context.Context) ([]session.Item, error) {
	return p.s.Items(ctx)
}
func (p plainSession) AddItems(ctx context.Context, items []session.Item) error {
	return p.s.AddItems(ctx, items)
}
func (p plainSession) PopItem(ctx context.Context) (session.Item, bool, error) {
	return p.s.PopItem(ctx)
}
func (p plainSession) Clear(ctx context.Context) error { return p.s.Clear(ctx) }
func (p plainSession) ReplaceItems(ctx context.Context, items []session.Item) error {
	return session.Replace(ctx, p.s, items)
}

func init() {
	adapters.Register(sharedScheme, sharedOpener{})
	adapters.Register(plainScheme, sharedOpener{plain: true})
	adapters.Register(noListScheme, sharedOpener{noList: true})
}

var sharedN atomic.Int64

func sharedURL(t *testing.T) string {
	u := fmt.Sprintf("%s://%s-%d", sharedScheme, strings.ReplaceAll(t.Name(), "/", "-"), sharedN.Add(1))
	st, err := adapters.Open(context.Background(), u)
	require.NoError(t, err)
	s, err := st.Session("probe")
	require.NoError(t, err)
	if !session.Probe(s).Has(session.CapVersionedReplace) {
		t.Skip("the memory adapter has no VersionedReplacer yet")
	}
	return u
}

func appendItems(t *testing.T, dsn, id string, items ...string) {
	t.Helper()
	seed(t, dsn, id, items...)
}

const orphanItem = `{"type":"function_call_output","call_id":"lost","output":"x"}`

// A writer's append between repair's read and its replace makes the
// conditional replace fail; repair reads and plans again, reuses the
// quarantine records it wrote (same problems: same repair id), and the
// append is kept.
func TestRepairRetriesAroundAnAppend(t *testing.T) {
	dsn := sharedURL(t)
	seed(t, dsn, "s", `{"role":"user","content":"q"}`, orphanItem)
	repairHookBeforeReplace = func(attempt int) {
		if attempt == 1 {
			appendItems(t, dsn, "s", `{"role":"user","content":"written meanwhile"}`)
		}
	}
	defer func() { repairHookBeforeReplace = nil }()
	code, out, stderr := sessionctl(t, "repair", "-apply", "-backup", "-", dsn, "s")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "repaired (attempt 2")
	require.Equal(t, []string{`{"role":"user","content":"q"}`, `{"role":"user","content":"written meanwhile"}`}, read(t, dsn, "s"))
	q := read(t, dsn, "s#quarantine")
	require.Len(t, q, 1, "the retry wrote no second copy")
	require.Contains(t, q[0], orphanItem)
}

// When the append changes the problems (a new orphan), the earlier
// attempt's quarantine records are withdrawn and the new plan's written:
// each removed item is in the quarantine once.
func TestRepairRetryWithANewProblemQuarantinesEachItemOnce(t *testing.T) {
	dsn := sharedURL(t)
	seed(t, dsn, "s", `{"role":"user","content":"q"}`, orphanItem)
	second := `{"type":"function_call_output","call_id":"lost2","output":"y"}`
	repairHookBeforeReplace = func(attempt int) {
		if attempt == 1 {
			appendItems(t, dsn, "s", second)
		}
	}
	defer func() { repairHookBeforeReplace = nil }()
	code, _, stderr := sessionctl(t, "repair", "-apply", "-backup", "-", dsn, "s")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{`{"role":"user","content":"q"}`}, read(t, dsn, "s"))
	q := read(t, dsn, "s#quarantine")
	require.Len(t, q, 2, "%q", q)
	require.Contains(t, q[0], orphanItem)
	require.Contains(t, q[1], second)
}

// A writer that changes the session before every replace: repair gives up
// saying so, the session holds everything, the quarantine one copy.
func TestRepairGivesUpBesideABusyWriter(t *testing.T) {
	dsn := sharedURL(t)
	seed(t, dsn, "s", `{"role":"user","content":"q"}`, orphanItem)
	n := 0
	repairHookBeforeReplace = func(int) {
		n++
		appendItems(t, dsn, "s", fmt.Sprintf(`{"role":"user","content":"busy %d"}`, n))
	}
	defer func() { repairHookBeforeReplace = nil }()
	code, _, stderr := sessionctl(t, "repair", "-apply", "-backup", "-", dsn, "s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, fmt.Sprintf("changed before each of %d replaces", repairAttempts))
	require.Contains(t, stderr, "nothing lost")
	require.Contains(t, stderr, "records this run wrote were withdrawn")
	require.Len(t, read(t, dsn, "s"), 2+repairAttempts)
	require.Empty(t, read(t, dsn, "s#quarantine"), "the quarantine is as it was")

	repairHookBeforeReplace = nil
	code, out, stderr := sessionctl(t, "repair", "-apply", "-json", "-backup", "-", dsn, "s")
	require.Equal(t, 0, code, stderr)
	var rep repairReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.Applied)
	require.Len(t, read(t, dsn, "s#quarantine"), 1)
	require.Len(t, read(t, dsn, "s"), 1+repairAttempts)
}

// A store without the versioned-replace capability: -apply refuses, unless
// -offline.
func TestRepairRefusesAnUnversionedStoreUnlessOffline(t *testing.T) {
	dsn := fmt.Sprintf("%s://%s", plainScheme, t.Name())
	seed(t, dsn, "s", `{"role":"user","content":"q"}`, orphanItem)
	code, _, stderr := sessionctl(t, "repair", "-apply", "-backup", "-", dsn, "s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "lack the versioned-replace capability")
	require.Contains(t, stderr, "-offline")
	require.Len(t, read(t, dsn, "s"), 2, "nothing changed")
	require.Empty(t, read(t, dsn, "s#quarantine"))
	code, _, stderr = sessionctl(t, "repair", "-apply", "-offline", "-backup", "-", dsn, "s")
	require.Equal(t, 0, code, stderr)
	require.Len(t, read(t, dsn, "s"), 1)
}

// liveBackends are the backends the repair-beside-writers test runs on:
// the shared memory store, and every backend whose sessions are
// VersionedReplacers (the others are named as skipped).
func liveBackends(t *testing.T) map[string]func(t *testing.T) string {
	out := map[string]func(t *testing.T) string{"memory-shared": sharedURL}
	for _, b := range storetest.Backends() {
		if !b.Peer {
			continue
		}
		out[b.Name] = func(t *testing.T) string { return b.URL(t) }
	}
	return out
}

// agentPace is the mean time between one writer's batches in
// TestRepairBesideLiveWriters: 80 ms (a few batches a second, an agent's
// pace), or more where a repair's reads are slow (the Mongo-wire test
// server scans its collection on every query): three times what the reads
// of one repair attempt take (version, history, version, and the history
// again), so that the 4 writers leave an attempt a fair chance to find
// the session unchanged. The writers still append beside every attempt.
func agentPace(t *testing.T, s session.Session) time.Duration {
	t.Helper()
	ctx := context.Background()
	t0 := time.Now()
	for range 2 {
		_, err := session.Version(ctx, s)
		require.NoError(t, err)
		_, err = session.All(ctx, s)
		require.NoError(t, err)
	}
	return max(80*time.Millisecond, 3*time.Since(t0))
}

// TestRepairBesideLiveWriters runs repair -apply in a loop while 4
// goroutines append acknowledged batches (a user message, and every third
// batch an orphan output for repair to move), each at an agent's pace
// (agentPace): every acknowledged item is in the session, or, for an
// orphan, in the quarantine, exactly once. When three repairs in a row gave
// up beside the writers, the next runs while they pause (as repair's
// message tells an operator to do): on a loaded machine a slow backend's
// reads can outlast every gap the writers leave.
func TestRepairBesideLiveWriters(t *testing.T) {
	for name, mk := range liveBackends(t) {
		t.Run(name, func(t *testing.T) {
			dsn := mk(t)
			seed(t, dsn, "live", `{"role":"user","content":"start"}`, orphanItem)
			st, err := adapters.Open(context.Background(), dsn)
			require.NoError(t, err)
			defer st.Close()
			s, err := st.Session("live")
			require.NoError(t, err)
			if !session.Probe(s).Has(session.CapVersionedReplace) {
				t.Skipf("%s: no VersionedReplacer yet: repair -apply refuses it without -offline", name)
			}
			pace := agentPace(t, s)
			ctx, stop := context.WithCancel(context.Background())
			var mu sync.Mutex
			var acked []string
			var wg sync.WaitGroup
			var pause sync.RWMutex // held by a repair the writers wait for
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ctx.Err() == nil; n++ {
						batch := []string{fmt.Sprintf(`{"role":"user","content":"w%d-%d"}`, g, n)}
						if n%3 == 2 {
							batch = append(batch, fmt.Sprintf(`{"type":"function_call_output","call_id":"orphan-%d-%d","output":"x"}`, g, n))
						}
						its, err := session.ParseItems(batch...)
						if err != nil {
							panic(err)
						}
						pause.RLock()
						err = s.AddItems(context.Background(), its)
						pause.RUnlock()
						if err == nil {
							mu.Lock()
							acked = append(acked, batch...)
							mu.Unlock()
						}
						// An agent's pace, not a benchmark's, so that a repair
						// finds a moment.
						time.Sleep(pace/2 + time.Duration(rand.Int64N(int64(pace))))
					}
				}()
			}
			repaired, inPause, clean, gaveUp, inARow := 0, 0, 0, 0, 0
			// At least 1.5 s of repairs, and on a slow or loaded backend
			// more, up to 20 s, until one has applied.
			deadline, last := time.Now().Add(1500*time.Millisecond), time.Now().Add(20*time.Second)
			for now := time.Now(); now.Before(deadline) || repaired+inPause == 0 && now.Before(last); now = time.Now() {
				paused := inARow >= 3
				if paused {
					pause.Lock()
				}
				code, out, stderr := sessionctl(t, "repair", "-apply", "-backup", "-", dsn, "live")
				if paused {
					pause.Unlock()
				}
				streak := inARow
				inARow = 0
				switch {
				case code == 0 && strings.Contains(out, "nothing to repair"):
					clean++
				case code == 0 && paused:
					inPause++
				case code == 0:
					repaired++
				case strings.Contains(stderr, "a writer is appending") && !paused:
					gaveUp++
					inARow = streak + 1
				default:
					t.Fatalf("repair: %d %s", code, stderr)
				}
			}
			stop()
			wg.Wait()
			code, _, stderr := sessionctl(t, "repair", "-apply", "-backup", "-", dsn, "live")
			require.Equal(t, 0, code, stderr)

			got := map[string]int{}
			for _, it := range read(t, dsn, "live") {
				got[it]++
			}
			for _, rec := range read(t, dsn, "live#quarantine") {
				var r struct {
					Item json.RawMessage `json:"item"`
				}
				require.NoError(t, json.Unmarshal([]byte(rec), &r))
				got[string(r.Item)]++
			}
			lost, dup := 0, 0
			for _, a := range acked {
				switch got[a] {
				case 0:
					lost++
				case 1:
				default:
					dup++
				}
			}
			t.Logf("%s: writers every %v on average; %d acknowledged items, %d lost, %d duplicated; %d repairs applied beside the writers, %d while they paused, %d found nothing to repair, %d gave up beside the writers", name, pace, len(acked), lost, dup, repaired, inPause, clean, gaveUp)
			require.Zero(t, lost)
			require.Zero(t, dup)
			require.Positive(t, repaired+inPause)
		})
	}
}

// An append to the source during the copy is not copied: migrate says so
// and fails the session; running it again completes the copy (the
// destination holds a prefix of the source).
func TestMigrateReportsASourceThatChangedDuringTheCopy(t *testing.T) {
	src, dst := sharedURL(t), sqliteURL(t, "to.db")
	seed(t, src, "s", `{"role":"user","content":"one"}`)
	migrateHookAfterWrite = func(id string) {
		appendItems(t, src, id, `{"role":"user","content":"two"}`)
	}
	code, out, stderr := sessionctl(t, "migrate", "-offline", "--from", src, "--to", dst)
	migrateHookAfterWrite = nil
	require.Equal(t, 1, code)
	require.Contains(t, out, "0 copied, 0 already present, 1 failed")
	require.Contains(t, stderr, "the source changed during the copy: the destination holds the 1 item read; what was written to the source since is not copied (run migrate again to copy it)")
	require.Equal(t, []string{`{"role":"user","content":"one"}`}, read(t, dst, "s"))

	code, out, stderr = sessionctl(t, "migrate", "-offline", "--from", src, "--to", dst)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "1 copied")
	require.Equal(t, read(t, src, "s"), read(t, dst, "s"))
}

// A store that cannot list its sessions: an unknown id reads as an empty
// session, and inspect and repair say so instead of refusing it.
func TestUnknownIDOnAStoreThatCannotList(t *testing.T) {
	dsn := fmt.Sprintf("%s://%s", noListScheme, t.Name())
	code, out, stderr := sessionctl(t, "inspect", dsn, "s1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, cannotListNote)
	code, out, stderr = sessionctl(t, "repair", dsn, "s1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `session "s1" reads as empty `+cannotListNote)
	require.Contains(t, out, "nothing to repair")
}
