package linearize

import (
	"context"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

func TestMain(m *testing.M) { testservers.Main(m) }

// EnvLong selects the long setting: LINEARIZE_LONG=1.
const EnvLong = "LINEARIZE_LONG"

// EnvHistories, when set, overrides the setting's number of histories per
// backend, fault and client count.
const EnvHistories = "LINEARIZE_HISTORIES"

// setting is how much a campaign records and how long a check may take.
type setting struct {
	histories int           // per backend, fault and client count
	ops       map[int]int   // operations per client, by client count
	pace      float64       // Config.Pace per client: 8 clients pace 4, 16 pace 8
	check     time.Duration // per history; a check that runs out counts as a timeout
	minimize  time.Duration // for the counterexample of one backend, fault and client count
}

func current() setting {
	set := setting{histories: 2, ops: map[int]int{8: 25, 16: 12}, pace: 0.5, check: 3 * time.Second, minimize: 10 * time.Second}
	if os.Getenv(EnvLong) == "1" {
		set = setting{histories: 40, ops: map[int]int{8: 40, 16: 25}, pace: 0.5, check: 20 * time.Second, minimize: 60 * time.Second}
	}
	if n, err := strconv.Atoi(os.Getenv(EnvHistories)); err == nil && n > 0 {
		set.histories = n
	}
	return set
}

var clientCounts = []int{8, 16}

var stampSeq atomic.Int64

// stamp is unique in this run and across runs, for key prefixes, database
// names and session ids.
func stamp() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(stampSeq.Add(1), 36)
}

// recordFunc records one history on the fresh session id and returns it
// with the number of faults injected meanwhile and what the session
// offers (session.Probe: AppendOnce runs only where it is offered).
type recordFunc func(t *testing.T, id string, cfg Config) (History, int, session.Capabilities)

// target is one backend under one fault.
type target struct {
	backend, fault string
	// start prepares the backend for clients clients and returns how to
	// record a history.
	start func(t *testing.T, clients int) recordFunc
}

func (tg target) name() string {
	if tg.fault == "" {
		return tg.backend
	}
	return tg.backend + "+" + tg.fault
}

func openStore(t *testing.T, dsn string) adapters.Store {
	t.Helper()
	st, err := adapters.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", adapters.Redact(dsn), err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// opener opens session id.
type opener func(id string) (session.Session, error)

func storeOpener(t *testing.T, dsn string) opener { return openStore(t, dsn).Session }

// encryptedOpener wraps every session of open with encrypted.New.
func encryptedOpener(open opener) opener {
	return func(id string) (session.Session, error) {
		s, err := open(id)
		if err != nil {
			return nil, err
		}
		return encrypted.New(s, encrypted.Options{Keys: []encrypted.Key{{Secret: "linearize-master-key"}}})
	}
}

// injector injects faults while a history is recorded: progress counts
// the operations done of total; it returns the faults injected once done
// is closed.
type injector func(progress *atomic.Int64, total int64, done <-chan struct{}) int

// plain records on the sessions open returns, with inject (if not nil)
// running meanwhile; each client commits through a handle of its own
// (Config.Handles).
func plain(open opener, inject injector) recordFunc {
	return func(t *testing.T, id string, cfg Config) (History, int, session.Capabilities) {
		s, err := open(id)
		if err != nil {
			t.Fatalf("open session: %v", err)
		}
		caps := session.Probe(s)
		for range cfg.Clients {
			h, err := open(id)
			if err != nil {
				t.Fatalf("open session: %v", err)
			}
			cfg.Handles = append(cfg.Handles, h)
		}
		if inject == nil {
			return Record(context.Background(), s, cfg), 0, caps
		}
		var progress atomic.Int64
		cfg.Progress = &progress
		done := make(chan struct{})
		faults := make(chan int, 1)
		go func() { faults <- inject(&progress, int64(cfg.Clients*cfg.Ops), done) }()
		h := Record(context.Background(), s, cfg)
		close(done)
		return h, <-faults, caps
	}
}

// waitFor waits until progress reaches n or done is closed; it reports
// whether progress reached n.
func waitFor(progress *atomic.Int64, n int64, done <-chan struct{}) bool {
	for progress.Load() < n {
		select {
		case <-done:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// connectionFaults cuts connections through proxy six times a history, at
// even steps of its progress: all connections at once, the next request
// cut in the middle, or the next reply lost after the server acted.
func connectionFaults(proxy *faultproxy.Proxy, seed uint64) injector {
	rng := rand.New(rand.NewPCG(seed, 0))
	var mu sync.Mutex
	return func(progress *atomic.Int64, total int64, done <-chan struct{}) int {
		n := 0
		for k := int64(1); k <= 6; k++ {
			if !waitFor(progress, total*k/7, done) {
				break
			}
			mu.Lock()
			f := rng.IntN(3)
			mu.Unlock()
			switch f {
			case 0:
				proxy.CloseAll()
			case 1:
				proxy.Once(faultproxy.CutRequest, nil)
			case 2:
				proxy.Once(faultproxy.LoseReply, nil)
			}
			n++
		}
		proxy.Set(faultproxy.None, nil)
		return n
	}
}

// serverKill SIGKILLs srv once a history, a third of the way in, and
// starts it again 300 ms later.
func serverKill(srv *testservers.RedisServer) injector {
	return func(progress *atomic.Int64, total int64, done <-chan struct{}) int {
		if !waitFor(progress, total/3, done) {
			return 0
		}
		srv.Kill()
		time.Sleep(300 * time.Millisecond)
		srv.Start()
		return 1
	}
}

// viaProxy returns raw with its host replaced by a fault proxy's.
func viaProxy(t *testing.T, raw string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return u.String(), p
}

// withQuery appends query options to a URL that may have a query already.
func withQuery(raw, q string) string {
	if strings.Contains(raw, "?") {
		return raw + "&" + q
	}
	return raw + "?" + q
}

func sqliteDSN(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "sessions.db")
}

func redisDSN(t *testing.T) string {
	return withQuery(testservers.Redis(t), "key_prefix=lz"+stamp())
}

func postgresDSN(t *testing.T) string { return testservers.Postgres(t) }

func mongoDSN(t *testing.T) string {
	u, err := url.Parse(testservers.Mongo(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/lz" + stamp()
	return u.String()
}

func simple(backend string, open func(t *testing.T) opener) target {
	return target{backend: backend, start: func(t *testing.T, _ int) recordFunc { return plain(open(t), nil) }}
}

// targets are every backend, and the faults, that the campaign runs.
func targets() []target {
	return []target{
		simple("memory", func(t *testing.T) opener { return storeOpener(t, "memory://") }),
		simple("sqlite", func(t *testing.T) opener { return storeOpener(t, sqliteDSN(t)) }),
		{backend: "sqlite-3proc", start: func(t *testing.T, clients int) recordFunc {
			return processes(t, sqliteDSN(t), 3, clients)
		}},
		simple("redis", func(t *testing.T) opener { return storeOpener(t, redisDSN(t)) }),
		simple("redis-python", func(t *testing.T) opener {
			return storeOpener(t, withQuery(redisDSN(t), "layout=python"))
		}),
		simple("redis-cluster", func(t *testing.T) opener {
			return storeOpener(t, "redis+cluster://"+strings.Join(testservers.RedisCluster(t), ",")+"?key_prefix=lz"+stamp())
		}),
		simple("postgres", func(t *testing.T) opener { return storeOpener(t, postgresDSN(t)) }),
		simple("mongo", func(t *testing.T) opener { return storeOpener(t, mongoDSN(t)) }),
		simple("encrypted-sqlite", func(t *testing.T) opener { return encryptedOpener(storeOpener(t, sqliteDSN(t))) }),
		simple("encrypted-redis", func(t *testing.T) opener { return encryptedOpener(storeOpener(t, redisDSN(t))) }),
		{backend: "redis", fault: "conn-kill", start: func(t *testing.T, _ int) recordFunc {
			dsn, proxy := viaProxy(t, testservers.Redis(t))
			dsn = withQuery(dsn, "key_prefix=lz"+stamp()+"&dial_timeout=500ms&read_timeout=2s&write_timeout=2s")
			return plain(storeOpener(t, dsn), connectionFaults(proxy, 1))
		}},
		{backend: "postgres", fault: "conn-kill", start: func(t *testing.T, _ int) recordFunc {
			dsn, proxy := viaProxy(t, postgresDSN(t))
			return plain(storeOpener(t, withQuery(dsn, "connect_timeout=2")), connectionFaults(proxy, 2))
		}},
		{backend: "redis-durable", fault: "sigkill", start: func(t *testing.T, _ int) recordFunc {
			srv := testservers.NewRedisServer(t)
			dsn := withQuery(srv.URL(), "dial_timeout=500ms&read_timeout=2s&write_timeout=2s")
			return plain(storeOpener(t, dsn), serverKill(srv))
		}},
	}
}

// tally is what a campaign checked.
type tally struct {
	histories, ops, ambiguous, faults int
	follows, lost                     int // Follow operations, and those that found the cursor lost
	once, retried                     int // AppendOnce operations, and those that answered false
	commits, conflicts, loads         int // Commit operations, those that conflicted, LoadCheckpoint operations
	saves, deletes, sdConflicts       int // SaveCheckpoint and DeleteCheckpoint operations, and those of them that conflicted
	illegal, unknown                  int
	checking                          time.Duration
	caps                              session.Capabilities
}

// count adds the Follow, AppendOnce and checkpoint operations of h to tl.
func (tl *tally) count(h History) {
	for _, op := range h {
		switch op.Input.Kind {
		case Follow:
			tl.follows++
			if op.Output.Lost {
				tl.lost++
			}
		case AppendOnce:
			tl.once++
			if op.Err == "" && !op.Output.OK {
				tl.retried++
			}
		case Commit:
			tl.commits++
			if op.Err == "" && !op.Output.OK {
				tl.conflicts++
			}
		case LoadCheckpoint:
			tl.loads++
		case SaveCheckpoint, DeleteCheckpoint:
			if op.Input.Kind == SaveCheckpoint {
				tl.saves++
			} else {
				tl.deletes++
			}
			if op.Err == "" && !op.Output.OK {
				tl.sdConflicts++
			}
		}
	}
}

// campaign records and checks set.histories histories of clients clients
// on fresh sessions, reports the first history that is not linearizable,
// and logs a RESULT line for docs/reliability.md's table.
func campaign(t *testing.T, name string, record recordFunc, clients int, set setting) tally {
	t.Helper()
	var tl tally
	var bad [][]porcupine.Operation // up to three illegal histories
	prefix := "lz-" + stamp()
	for h := range set.histories {
		cfg := Config{Clients: clients, Ops: set.ops[clients], Seed: uint64(time.Now().UnixNano()), Pace: set.pace * float64(clients)}
		hist, faults, caps := record(t, prefix+"-"+strconv.Itoa(h), cfg)
		tl.caps = caps
		tl.count(hist)
		ops := hist.Operations()
		began := time.Now()
		res := Check(ops, set.check)
		tl.checking += time.Since(began)
		tl.histories++
		tl.ops += len(hist)
		tl.ambiguous += Ambiguous(ops)
		tl.faults += faults
		switch res {
		case porcupine.Illegal:
			tl.illegal++
			if len(bad) < 3 {
				bad = append(bad, ops)
			}
		case porcupine.Unknown:
			tl.unknown++
		}
	}
	if len(bad) > 0 {
		report(t, name, bad, set.minimize, set.check)
	}
	follow := "its ItemsSince (a session.Follower)"
	if !tl.caps.Has(session.CapFollow) {
		follow = "session.ReadSince's fallback (not a session.Follower)"
	}
	t.Logf("%s: Follow through %s", name, follow)
	if !tl.caps.Has(session.CapAppendOnce) {
		t.Logf("%s: AppendOnce skipped: the session is not a session.OnceAppender (session.Probe: %v)", name, tl.caps)
	}
	if !tl.caps.Has(session.CapCheckpoints) {
		t.Logf("%s: LoadCheckpoint, SaveCheckpoint and DeleteCheckpoint skipped: the session is not a session.CheckpointStore (session.Probe: %v)", name, tl.caps)
	}
	if !tl.caps.Has(session.CapCheckpointCommit) {
		t.Logf("%s: Commit skipped: the session is not a session.CheckpointCommitter (session.Probe: %v)", name, tl.caps)
	}
	t.Logf("RESULT backend=%s clients=%d histories=%d ops=%d follow=%d lost=%d once=%d retried=%d commit=%d conflict=%d load=%d save=%d delete=%d sdconflict=%d ambiguous=%d faults=%d illegal=%d timeouts=%d checking=%v",
		name, clients, tl.histories, tl.ops, tl.follows, tl.lost, tl.once, tl.retried, tl.commits, tl.conflicts, tl.loads,
		tl.saves, tl.deletes, tl.sdConflicts, tl.ambiguous, tl.faults, tl.illegal, tl.unknown, tl.checking.Round(time.Millisecond))
	return tl
}

// report logs the smallest counterexample Minimize finds in histories
// that are not linearizable: the part of one that is not linearizable
// either, operation by operation, and porcupine's visualizations of it and
// of its whole history, in files that outlive the test.
func report(t *testing.T, name string, histories [][]porcupine.Operation, budget, timeout time.Duration) {
	t.Helper()
	var ops, small []porcupine.Operation
	for _, h := range histories {
		if m := Minimize(h, budget/time.Duration(len(histories)), timeout); small == nil || len(m) < len(small) {
			ops, small = h, m
		}
	}
	base := strings.NewReplacer("/", "_", "+", "_").Replace(name)
	paths := make([]string, 0, 2)
	for _, v := range []struct {
		suffix string
		ops    []porcupine.Operation
	}{{"min", small}, {"full", ops}} {
		f, err := os.CreateTemp("", "linearize-"+base+"-"+v.suffix+"-*.html")
		if err != nil {
			t.Logf("visualization: %v", err)
			continue
		}
		_ = f.Close()
		if err := Visualize(v.ops, f.Name(), timeout); err != nil {
			t.Logf("visualization: %v", err)
			continue
		}
		paths = append(paths, f.Name())
	}
	t.Logf("%s: NOT linearizable. %d of the history's %d operations are not linearizable either:\n%s\nvisualizations (minimized, full): %s",
		name, len(small), len(ops), Explain(small), strings.Join(paths, " "))
}

// TestLinearizable runs the campaign on every backend, with 8 and 16
// concurrent clients, and fails for a backend whose history is not
// linearizable.
func TestLinearizable(t *testing.T) {
	set := current()
	for _, tg := range targets() {
		t.Run(tg.name(), func(t *testing.T) {
			for _, clients := range clientCounts {
				t.Run(strconv.Itoa(clients), func(t *testing.T) {
					tl := campaign(t, tg.name(), tg.start(t, clients), clients, set)
					if tl.illegal > 0 {
						t.Errorf("%s with %d clients: %d of %d histories are not linearizable", tg.name(), clients, tl.illegal, tl.histories)
					}
					if tl.follows == 0 || tl.caps.Has(session.CapAppendOnce) && tl.once == 0 ||
						tl.caps.Has(session.CapCheckpointCommit) && tl.commits == 0 ||
						tl.caps.Has(session.CapCheckpoints) && (tl.loads == 0 || tl.saves == 0 || tl.deletes == 0) {
						t.Errorf("%s with %d clients: %d Follow, %d AppendOnce, %d Commit, %d LoadCheckpoint, %d SaveCheckpoint and %d DeleteCheckpoint operations: the mix did not check them (session.Probe: %v)",
							tg.name(), clients, tl.follows, tl.once, tl.commits, tl.loads, tl.saves, tl.deletes, tl.caps)
					}
				})
			}
		})
	}
}
