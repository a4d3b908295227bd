package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func TestMain(m *testing.M) { testservers.Main(m) }

const (
	// EnvRuns is the number of runs (sessions) per backend: 100 by
	// default (the short setting of make test), 1000 for the long one.
	EnvRuns = "LOADTEST_RUNS"
	// EnvKills is the number of SIGKILLs per backend: 1 by default, 5
	// when LOADTEST_RUNS is set.
	EnvKills = "LOADTEST_KILLS"

	envDSN      = "LOADTEST_CHILD_DSN"
	envSlot     = "LOADTEST_CHILD_SLOT"
	envGen      = "LOADTEST_CHILD_GEN"
	envPrefix   = "LOADTEST_CHILD_PREFIX"
	envChildN   = "LOADTEST_CHILD_RUNS"
	envLogs     = "LOADTEST_CHILD_LOGS"
	envDead     = "LOADTEST_CHILD_DEAD"
	envDeadline = "LOADTEST_CHILD_DEADLINE"
)

// procs is the number of child processes driving the runs at once.
const procs = 3

// runOpts: output guardrails with stop-on-first-tool, so the interrupted
// turn is withheld on the checkpoint until it settles.
var runOpts = runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}

// kinds are the Run calls whose latencies are reported, in loop order.
var kinds = []string{"Open", "Input", "Interrupt", "Claim", "Reclaim", "Output", "Settle", "Finish"}

type config struct {
	runs, kills int
	long        bool
	budget      time.Duration // a child's bound on its whole work
}

func settings() config {
	c := config{runs: 100, kills: 1, budget: 90 * time.Second}
	if n, err := strconv.Atoi(os.Getenv(EnvRuns)); err == nil && n > 0 {
		c.runs, c.kills, c.long, c.budget = n, 5, true, 20*time.Minute
	}
	if n, err := strconv.Atoi(os.Getenv(EnvKills)); err == nil && n >= 0 {
		c.kills = n
	}
	return c
}

// The script of one session: the user's message, the call that awaits
// approval, its output, the assistant's final message.

func sessionID(prefix string, k int) string { return prefix + "-" + strconv.Itoa(k) }

func callID(sid string) string { return "call-" + sid }

func userItem(sid string) session.Item {
	return session.MustItem(`{"role":"user","content":"u:` + sid + `"}`)
}

func callItem(sid string) session.Item {
	return session.MustItem(`{"type":"function_call","call_id":"` + callID(sid) + `","name":"transfer","arguments":"{\"to\":\"bob\"}"}`)
}

func outputItem(id string) session.Item {
	return session.MustItem(`{"type":"function_call_output","call_id":"` + id + `","output":"ran ` + id + `"}`)
}

func doneItem(sid string) session.Item {
	return session.MustItem(`{"type":"message","role":"assistant","content":"d:` + sid + `"}`)
}

// script is the order of the items of a session's history.
var script = []string{"user", "call", "out", "done"}

// itemKind names a script item of session sid ("user", "call", "out",
// "done"), or "" for an item the script never writes there.
func itemKind(it session.Item, sid string) string {
	var v struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content any    `json:"content"`
		CallID  string `json:"call_id"`
	}
	if json.Unmarshal(it.Bytes(), &v) != nil {
		return ""
	}
	c, _ := v.Content.(string)
	switch {
	case v.Type == "function_call" && v.CallID == callID(sid):
		return "call"
	case v.Type == "function_call_output" && v.CallID == callID(sid):
		return "out"
	case v.Role == "user" && c == "u:"+sid:
		return "user"
	case v.Role == "assistant" && c == "d:"+sid:
		return "done"
	}
	return ""
}

// progress returns how many script items items holds, when they are a
// prefix of the script.
func progress(items []session.Item, sid string) (int, error) {
	if len(items) > len(script) {
		return 0, fmt.Errorf("%s: %d items, the script writes %d", sid, len(items), len(script))
	}
	for i, it := range items {
		if itemKind(it, sid) != script[i] {
			return 0, fmt.Errorf("%s: item %d is %s, want the %s", sid, i, it, script[i])
		}
	}
	return len(items), nil
}

// stats is what the children reported.
type stats struct {
	Lat  map[string][]int64 // nanoseconds per call, by kind
	N    map[string]int     // counters
	Errs []string           // distinct error messages, the first 20
}

// role is what a process does with a session.
type role int

const (
	// roleStart: Open, Input, Interrupt, up to the approval.
	roleStart role = iota
	// roleApprove: from the approval to the end (Claim, the tool, Output,
	// Settle, Finish), resolving a call found in doubt; also a start
	// left unfinished by a killed starter.
	roleApprove
)

// roles returns what process slot does with session k: slot k%3 starts
// it, slot (k+1)%3 approves it, and for every other session slot (k+2)%3
// approves it too, at the same time (contended).
func roles(slot, k int) []role {
	switch {
	case k%procs == slot:
		return []role{roleStart}
	case (k+1)%procs == slot, (k+2)%procs == slot && k%2 == 0:
		return []role{roleApprove}
	}
	return nil
}

// outcome of driving a session once.
type outcome int

const (
	finished outcome = iota // this process's part is done
	later                   // not started yet, or the attempts ran out: again later
	blocked                 // a live process claimed the call: it (or its successor) finishes
)

// worker is one child process's state. It reports on stdout, one line
// per event as it happens (so that a killed process loses at most the call
// in flight): "OP kind nanoseconds ok|conflict|error", "N counter" and
// "ERR message".
type worker struct {
	owner  string          // the claims' owner: p<slot>.g<generation>
	dead   map[string]bool // owners known to be dead (killed processes)
	logDir string
	log    *os.File // this process's tool log
}

func (w *worker) count(name string) { fmt.Println("N " + name) }

// do runs one Run call of kind and reports its latency and outcome.
func (w *worker) do(kind string, f func() error) error {
	t0 := time.Now()
	err := f()
	d := time.Since(t0)
	res := "ok"
	switch {
	case err == nil:
	case errors.Is(err, session.ErrCheckpointConflict):
		res = "conflict"
	default:
		res = "error"
		fmt.Println("ERR " + kind + ": " + strings.ReplaceAll(err.Error(), "\n", " "))
	}
	fmt.Printf("OP %s %d %s\n", kind, d.Nanoseconds(), res)
	return err
}

// parse adds one line of a child's report to s; false when the line is
// not a report.
func (s *stats) parse(line string) bool {
	if s.Lat == nil {
		s.Lat, s.N = map[string][]int64{}, map[string]int{}
	}
	switch {
	case strings.HasPrefix(line, "OP "):
		f := strings.Fields(line)
		if len(f) != 4 {
			return false
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return false
		}
		s.Lat[f[1]] = append(s.Lat[f[1]], ns)
		if f[3] != "ok" {
			s.N[f[3]+" "+f[1]]++
		}
	case strings.HasPrefix(line, "N "):
		s.N[line[2:]]++
	case strings.HasPrefix(line, "ERR "):
		s.N["messages"]++
		if e := line[4:]; len(s.Errs) < 20 && !slices.Contains(s.Errs, e) {
			s.Errs = append(s.Errs, e)
		}
	default:
		return false
	}
	return true
}

// tool is the approved call's side effect: a line in this process's log,
// durable before the tool returns.
func (w *worker) tool(sid, id string) error {
	if _, err := w.log.WriteString(sid + " " + id + " " + w.owner + "\n"); err != nil {
		return err
	}
	w.count("tool")
	return w.log.Sync()
}

// ran asks the tool's system, every process's log, whether call id of
// sid ran.
func (w *worker) ran(sid, id string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(w.logDir, "tool-*.log"))
	if err != nil {
		return false, err
	}
	needle := sid + " " + id + " "
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, err
		}
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, needle) {
				return true, nil
			}
		}
	}
	return false, nil
}

// drive takes session sid as far as role r goes from wherever it stands:
// every step is decided by what Open and the history say (Next). A
// conflict or an error reopens the run; a fatal error is one the script
// cannot go on from (the tool's log failed, the history is not the
// script's).
func (w *worker) drive(ctx context.Context, s session.Session, r role) (outcome, error) {
	sid := s.SessionID()
	var run *runstate.Run
	known := -1 // script items in the history, when this Run knows
	reopen := func() { run, known = nil, -1 }
	for range 64 {
		if run == nil {
			err := w.do("Open", func() error {
				var err error
				run, err = runstate.Open(ctx, s, withOwner(w.owner))
				return err
			})
			if err != nil {
				reopen()
				pause(ctx)
				continue
			}
		}
		if ids := run.InDoubt(); len(ids) > 0 {
			if r == roleStart {
				return finished, nil
			}
			id := ids[0]
			if by := claimedBy(run, id); by != w.owner && !w.dead[by] {
				// A live process is running the tool: it (or, if it is
				// killed, its successor) records the output.
				w.count("blocked by a live claim")
				return blocked, nil
			}
			ran, err := w.ran(sid, id)
			if err != nil {
				return finished, fmt.Errorf("ask the tools' logs: %w", err)
			}
			if ran {
				if err := w.do("Output", func() error { return run.Output(ctx, outputItem(id)) }); err != nil {
					reopen()
					continue
				}
				w.count("in doubt: found")
				continue
			}
			if err := w.do("Reclaim", func() error { return run.Reclaim(ctx, id) }); err != nil {
				reopen()
				continue
			}
			w.count("in doubt: reclaimed")
			fmt.Println("CLAIMED")
			if err := w.tool(sid, id); err != nil {
				return finished, fmt.Errorf("tool: %w", err)
			}
			if err := w.do("Output", func() error { return run.Output(ctx, outputItem(id)) }); err != nil {
				reopen()
			}
			continue
		}
		if ids := run.Awaiting(); len(ids) > 0 {
			if r == roleStart {
				return finished, nil
			}
			id := ids[0]
			if err := w.do("Claim", func() error { return run.Claim(ctx, id) }); err != nil {
				reopen()
				continue
			}
			fmt.Println("CLAIMED")
			if err := w.tool(sid, id); err != nil {
				return finished, fmt.Errorf("tool: %w", err)
			}
			if err := w.do("Output", func() error { return run.Output(ctx, outputItem(id)) }); err != nil {
				reopen()
			}
			continue
		}
		next := run.Next()
		switch next.Kind {
		case runstate.NextDone:
			w.count("finished")
			return finished, nil
		case runstate.NextSettle:
			if r == roleStart {
				return finished, nil
			}
			if err := w.do("Settle", func() error { return run.Settle(ctx) }); err != nil {
				reopen()
				continue
			}
			known = 3
			continue
		case runstate.NextInput, runstate.NextModel:
		default:
			return finished, fmt.Errorf("%s: unexpected next step %s", sid, next.Kind)
		}
		if known < 0 {
			items, err := session.All(ctx, s)
			if err != nil {
				_ = w.do("read", func() error { return err })
				reopen()
				pause(ctx)
				continue
			}
			if known, err = progress(items, sid); err != nil {
				return finished, err
			}
		}
		switch {
		case next.Kind == runstate.NextInput && known == len(script):
			return finished, nil // complete, its checkpoint deleted
		case next.Kind == runstate.NextInput && known == 0:
			if r != roleStart {
				w.count("not started yet")
				return later, nil // its starter has not started it yet
			}
			if err := w.do("Input", func() error { return run.Input(ctx, userItem(sid)) }); err != nil {
				reopen()
				continue
			}
			known = 1
		case next.Kind == runstate.NextInput:
			reopen() // the run started since this Run loaded its checkpoint
		case known == 1:
			if err := w.do("Interrupt", func() error {
				return run.Interrupt(ctx, "resp-"+sid, []session.Item{callItem(sid)}, callID(sid))
			}); err != nil {
				reopen()
				continue
			}
		case r == roleStart:
			return finished, nil
		case known == 3:
			if err := w.do("Finish", func() error { return run.Finish(ctx, "resp-d-"+sid, doneItem(sid)) }); err != nil {
				reopen()
				continue
			}
		case known == len(script):
			// The final message landed and its checkpoint is left: a
			// process died before deleting it, or another is about to.
			if err := w.do("Finish", func() error { return run.Finish(ctx, "") }); err != nil {
				reopen()
				continue
			}
		default:
			return finished, fmt.Errorf("%s: %d script items with next step %s", sid, known, next.Kind)
		}
	}
	return later, nil
}

func withOwner(owner string) runstate.Options {
	o := runOpts
	o.Owner = owner
	return o
}

// claimedBy returns who claimed call id, as the checkpoint records it.
func claimedBy(run *runstate.Run, id string) string {
	for _, c := range run.Checkpoint().Claims() {
		if c.CallID == id {
			return c.By
		}
	}
	return ""
}

// pause waits a few milliseconds before a run is opened again after an
// error (a busy database, a dropped connection).
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(2+rand.IntN(10)) * time.Millisecond):
	}
}

// TestLoadChild is a child process of TestFrontDoorLoad: it drives its
// share of the sessions, each on its own goroutine, and exits when every
// one of them is done (or it is killed).
func TestLoadChild(t *testing.T) {
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		t.Skip("only run as a child process of TestFrontDoorLoad")
	}
	slot, _ := strconv.Atoi(os.Getenv(envSlot))
	gen, _ := strconv.Atoi(os.Getenv(envGen))
	runs, _ := strconv.Atoi(os.Getenv(envChildN))
	budget, _ := time.ParseDuration(os.Getenv(envDeadline))
	prefix := os.Getenv(envPrefix)
	w := &worker{owner: fmt.Sprintf("p%d.g%d", slot, gen), dead: map[string]bool{}, logDir: os.Getenv(envLogs)}
	for _, o := range strings.Split(os.Getenv(envDead), ",") {
		if o != "" {
			w.dead[o] = true
		}
	}
	var err error
	w.log, err = os.OpenFile(filepath.Join(w.logDir, "tool-"+w.owner+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.log.Close()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	fmt.Println("READY")

	// The same order of sessions in every process, so that two approvers
	// of a session reach it at about the same time.
	order := rand.New(rand.NewPCG(uint64(runs), 36)).Perm(runs)
	var wg sync.WaitGroup
	var unfinished atomic.Int64
	var fatalMu sync.Mutex
	var fatal []string
	for _, k := range order {
		for _, r := range roles(slot, k) {
			sid := sessionID(prefix, k)
			wg.Go(func() {
				s, err := st.Session(sid)
				if err != nil {
					fatalMu.Lock()
					fatal = append(fatal, err.Error())
					fatalMu.Unlock()
					return
				}
				wait := 5 * time.Millisecond
				for {
					out, err := w.drive(ctx, s, r)
					if err != nil {
						fatalMu.Lock()
						fatal = append(fatal, err.Error())
						fatalMu.Unlock()
						return
					}
					if out != later {
						return
					}
					select {
					case <-ctx.Done():
						unfinished.Add(1)
						return
					case <-time.After(wait/2 + time.Duration(rand.Int64N(int64(wait)))):
					}
					wait = min(2*wait, 200*time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	fmt.Printf("DONE unfinished=%d fatal=%d\n", unfinished.Load(), len(fatal))
	if len(fatal) > 0 || unfinished.Load() > 0 {
		t.Fatalf("%s: %d sessions unfinished when the budget (%v) ran out; %d stopped: %v", w.owner, unfinished.Load(), budget, len(fatal), fatal)
	}
}

// proc is a started child process.
type proc struct {
	slot, gen int
	owner     string
	cmd       *exec.Cmd
	ready     chan bool
	claimed   chan struct{} // a signal per CLAIMED line (coalesced)
	claims    atomic.Int64
	exited    chan struct{} // closed once the process is reaped and its output read
	stderr    strings.Builder

	mu   sync.Mutex
	tail []string // its last lines other than the reports
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n") + "\n" + p.stderr.String()
}

// backend is a store the load runs on.
type backend struct {
	name string
	dsn  func(t *testing.T, stamp string) string
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t *testing.T, _ string) string {
			return "sqlite://" + filepath.Join(t.TempDir(), "sessions.db")
		}},
		{"postgres", func(t *testing.T, _ string) string { return testservers.Postgres(t) }},
		{"redis", func(t *testing.T, stamp string) string { return testservers.Redis(t) + "?key_prefix=" + stamp }},
		{"redis-cluster", func(t *testing.T, stamp string) string {
			return "redis+cluster://" + strings.Join(testservers.RedisCluster(t), ",") + "?key_prefix=" + stamp
		}},
	}
}

// Report is what one backend's load found and measured.
type Report struct {
	Runs, Processes, Kills                    int
	Completed, Lost, Duplicated, Orphaned     int
	Misordered, Unexpected, Problems, CPLeft  int
	RanTwice, NeverRan                        int
	InDoubtFound, InDoubtReclaimed            int
	ClaimsLost, BlockedByLiveClaim, Conflicts int
	Errors                                    int
	Elapsed                                   time.Duration
}

func percentile(ns []int64, p float64) time.Duration {
	if len(ns) == 0 {
		return 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	return time.Duration(s[int(float64(len(s)-1)*p)])
}

func frontDoorLoad(t *testing.T, b backend, cfg config) {
	ctx := context.Background()
	stamp := "lt" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dsn := b.dsn(t, stamp)
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	probe, err := st.Session(stamp + "-probe")
	require.NoError(t, err)
	_, ok := probe.(session.CheckpointStore)
	require.True(t, ok, "%s: the sessions (%T) keep no checkpoints", b.name, probe)
	_, atomicCommit := probe.(session.CheckpointCommitter)

	logs := t.TempDir()
	rng := rand.New(rand.NewPCG(20261206, uint64(len(b.name))))
	var dead []string
	var total stats
	var totalMu sync.Mutex
	start := func(slot, gen int) *proc {
		p := &proc{slot: slot, gen: gen, owner: fmt.Sprintf("p%d.g%d", slot, gen), ready: make(chan bool, 1), claimed: make(chan struct{}, 1), exited: make(chan struct{})}
		p.cmd = exec.Command(os.Args[0], "-test.run=^TestLoadChild$", "-test.count=1")
		p.cmd.Env = append(os.Environ(),
			envDSN+"="+dsn, envSlot+"="+strconv.Itoa(slot), envGen+"="+strconv.Itoa(gen),
			envPrefix+"="+stamp, envChildN+"="+strconv.Itoa(cfg.runs), envLogs+"="+logs,
			envDead+"="+strings.Join(dead, ","), envDeadline+"="+cfg.budget.String())
		out, err := p.cmd.StdoutPipe()
		require.NoError(t, err)
		p.cmd.Stderr = &p.stderr
		require.NoError(t, p.cmd.Start())
		go func() {
			defer close(p.exited)
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<20), 256<<20)
			sent := false
			for sc.Scan() {
				line := sc.Text()
				switch {
				case line == "CLAIMED":
					p.claims.Add(1)
					select {
					case p.claimed <- struct{}{}:
					default:
					}
				case strings.HasPrefix(line, "OP "), strings.HasPrefix(line, "N "), strings.HasPrefix(line, "ERR "):
					totalMu.Lock()
					total.parse(line)
					totalMu.Unlock()
				default:
					if !sent && line == "READY" {
						p.ready <- true
						sent = true
					}
					p.mu.Lock()
					p.tail = append(p.tail, line)
					if len(p.tail) > 40 {
						p.tail = p.tail[1:]
					}
					p.mu.Unlock()
				}
			}
			if !sent {
				p.ready <- false
			}
			_ = p.cmd.Wait()
		}()
		return p
	}
	awaitReady := func(p *proc) {
		select {
		case ok := <-p.ready:
			if !ok {
				<-p.exited
				t.Fatalf("%s ended before it was ready: %s", p.owner, p.output())
			}
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Fatalf("%s not ready after 60 s: %s", p.owner, p.output())
		}
	}
	var cur [procs]*proc
	defer func() {
		for _, p := range cur {
			if p != nil {
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
	}()
	for slot := range procs {
		cur[slot] = start(slot, 0)
	}
	for _, p := range cur {
		awaitReady(p)
	}
	began := time.Now()

	// The kills: each picks a running child and lands 0 to 2 ms after its
	// n-th claim from then on (n random), when many of its runs are in
	// flight and some inside the tool; the child is restarted at once
	// and resumes the sessions it had.
	var rep Report
	perProc := max(1, cfg.runs/(2*procs*(cfg.kills+1)))
	first := rng.IntN(procs)
	for try := 0; rep.Kills < cfg.kills && try < 4*cfg.kills; try++ {
		var running []int
		for slot, p := range cur {
			select {
			case <-p.exited:
			default:
				running = append(running, slot)
			}
		}
		if len(running) == 0 {
			break
		}
		p := cur[running[(first+try)%len(running)]] // in turn, so that every process is killed
		threshold := p.claims.Load() + int64(1+rng.IntN(perProc))
		alive := true
		timeout := time.After(cfg.budget)
		for alive && p.claims.Load() < threshold {
			select {
			case <-p.claimed:
			case <-p.exited:
				alive = false
			case <-timeout:
				t.Fatalf("%s made %d claims in %v, waiting for %d", p.owner, p.claims.Load(), cfg.budget, threshold)
			}
		}
		if !alive {
			continue
		}
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		if ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() {
			require.True(t, p.cmd.ProcessState.Success(), "%s failed: %s", p.owner, p.output())
			continue // it had finished
		}
		rep.Kills++
		dead = append(dead, p.owner)
		t.Logf("killed %s after %d claims", p.owner, p.claims.Load())
		cur[p.slot] = start(p.slot, p.gen+1)
		awaitReady(cur[p.slot])
	}
	for _, p := range cur {
		select {
		case <-p.exited:
		case <-time.After(cfg.budget + time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Fatalf("%s did not finish: %s", p.owner, p.output())
		}
		require.True(t, p.cmd.ProcessState.Success(), "%s failed: %s", p.owner, p.output())
	}
	rep.Elapsed = time.Since(began)

	// Every session: exactly the script, nothing Diagnose finds, no
	// checkpoint left; every call's tool ran exactly once.
	rep.Runs, rep.Processes = cfg.runs, procs
	for k := range cfg.runs {
		sid := sessionID(stamp, k)
		s, err := st.Session(sid)
		require.NoError(t, err)
		items, err := session.All(ctx, s)
		require.NoError(t, err)
		count := map[string]int{}
		var got []string
		for _, it := range items {
			kind := itemKind(it, sid)
			if kind == "" {
				rep.Unexpected++
				t.Logf("%s: unexpected item %s", sid, it)
				continue
			}
			count[kind]++
			got = append(got, kind)
		}
		for _, kind := range script {
			switch c := count[kind]; {
			case c == 0:
				rep.Lost++
			case c > 1:
				rep.Duplicated += c - 1
			}
		}
		if count["done"] == 1 {
			rep.Completed++
		}
		if !slices.Equal(got, script) {
			if len(got) == len(script) && rep.Lost == 0 {
				rep.Misordered++
			}
			t.Logf("%s: history %v", sid, got)
		}
		for _, p := range history.Diagnose(items) {
			rep.Problems++
			if p.Kind == history.ProblemOrphanOutput || p.Kind == history.ProblemUnansweredCall {
				rep.Orphaned++
			}
			t.Logf("%s: %s at %d (%s)", sid, p.Kind, p.Index, p.Key)
		}
		cps, ok := s.(session.CheckpointStore)
		require.True(t, ok)
		if doc, _, err := cps.LoadCheckpoint(ctx, runstate.DefaultName); !errors.Is(err, session.ErrNoCheckpoint) && (err != nil || !runstate.Idle(doc)) {
			rep.CPLeft++
			t.Logf("%s: checkpoint left behind (%v)", sid, err)
		}
	}
	runsOf := map[string]int{}
	files, err := filepath.Glob(filepath.Join(logs, "tool-*.log"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for line := range strings.Lines(string(b)) {
			if fs := strings.Fields(line); len(fs) == 3 {
				runsOf[fs[1]]++
			}
		}
	}
	for k := range cfg.runs {
		switch c := runsOf[callID(sessionID(stamp, k))]; {
		case c == 0:
			rep.NeverRan++
		case c > 1:
			rep.RanTwice += c - 1
			t.Logf("%s ran %d times", callID(sessionID(stamp, k)), c)
		}
	}
	if len(runsOf) != cfg.runs-rep.NeverRan {
		t.Errorf("the tools' logs name %d calls, the runs have %d", len(runsOf), cfg.runs-rep.NeverRan)
	}

	rep.InDoubtFound, rep.InDoubtReclaimed = total.N["in doubt: found"], total.N["in doubt: reclaimed"]
	rep.ClaimsLost = total.N["conflict Claim"] + total.N["conflict Reclaim"]
	rep.BlockedByLiveClaim = total.N["blocked by a live claim"]
	for k, v := range total.N {
		switch {
		case strings.HasPrefix(k, "conflict "):
			rep.Conflicts += v
		case strings.HasPrefix(k, "error "):
			rep.Errors += v
		}
	}
	secs := rep.Elapsed.Seconds()
	t.Logf("front door %-13s atomic=%v runs=%d/%d processes=%d kills=%d lost=%d duplicated=%d orphaned=%d misordered=%d unexpected=%d diagnose=%d checkpoints-left=%d calls-run-twice=%d never-ran=%d in-doubt found=%d reclaimed=%d claims-lost=%d blocked-by-live-claim=%d conflicts=%d errors=%d elapsed=%.1fs runs/s=%.1f",
		b.name, atomicCommit, rep.Completed, rep.Runs, rep.Processes, rep.Kills, rep.Lost, rep.Duplicated, rep.Orphaned, rep.Misordered, rep.Unexpected, rep.Problems, rep.CPLeft,
		rep.RanTwice, rep.NeverRan, rep.InDoubtFound, rep.InDoubtReclaimed, rep.ClaimsLost, rep.BlockedByLiveClaim, rep.Conflicts, rep.Errors, secs, float64(rep.Completed)/secs)
	t.Logf("front door %-13s approvers that found a run not started yet: %d", b.name, total.N["not started yet"])
	for _, kind := range kinds {
		lat := total.Lat[kind]
		t.Logf("front door %-13s %-9s calls=%-6d ops/s=%-7.0f p50=%-10v p99=%-10v conflicts=%d errors=%d",
			b.name, kind, len(lat), float64(len(lat))/secs, percentile(lat, 0.5).Round(time.Microsecond), percentile(lat, 0.99).Round(time.Microsecond),
			total.N["conflict "+kind], total.N["error "+kind])
	}
	if n := total.N["error read"]; n > 0 {
		t.Logf("front door %-13s history reads failed: %d", b.name, n)
	}
	for _, e := range total.Errs {
		t.Logf("front door %-13s error: %s", b.name, e)
	}

	require.Equal(t, cfg.runs, rep.Completed, "every run completed")
	require.Zero(t, rep.Lost, "lost items")
	require.Zero(t, rep.Duplicated, "duplicated items")
	require.Zero(t, rep.Orphaned, "orphaned items")
	require.Zero(t, rep.Misordered, "misordered items")
	require.Zero(t, rep.Unexpected, "unexpected items")
	require.Zero(t, rep.Problems, "problems Diagnose finds")
	require.Zero(t, rep.CPLeft, "checkpoints left behind")
	require.Zero(t, rep.RanTwice, "calls run by two processes (or twice)")
	require.Zero(t, rep.NeverRan, "answered calls whose tool never ran")
}

// TestFrontDoorLoad drives runstate.Run's approval runs from three
// processes at once on each backend, kills some of them with SIGKILL and
// resumes their sessions in a restarted process, then checks every
// history, checkpoint and tool execution (see the package documentation).
func TestFrontDoorLoad(t *testing.T) {
	cfg := settings()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { frontDoorLoad(t, b, cfg) })
	}
}
