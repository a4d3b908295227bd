package crashtest

// The crash loop of runstate's front door (runstate.Run) and the
// two-copies race: both drive Open, Input, Interrupt, Output, Settle and
// Finish on the checkpoint kept beside the session, in child processes.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

const (
	envRunChild   = "CRASHTEST_RUN_CHILD_DSN"
	envRunSession = "CRASHTEST_RUN_SESSION"
	envRunTools   = "CRASHTEST_RUN_TOOLS"
	envRunRuns    = "CRASHTEST_RUN_RUNS"
	envTwoChild   = "CRASHTEST_TWO_CHILD_DSN"
	envTwoTools   = "CRASHTEST_TWO_TOOLS"
)

// runOpts are the options of every Run here: output guardrails with
// stop-on-first-tool, so an interrupted turn is withheld until it settles.
var runOpts = runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool}

func userItem(k int) session.Item {
	return session.MustItem(`{"role":"user","content":"u` + strconv.Itoa(k) + `"}`)
}

func callID(k int) string { return "c" + strconv.Itoa(k) }

func callItem(k int) session.Item {
	return session.MustItem(`{"type":"function_call","call_id":"` + callID(k) + `","name":"needs_approval","arguments":"{\"k\":` + strconv.Itoa(k) + `}"}`)
}

func outputItem(id string) session.Item {
	return session.MustItem(`{"type":"function_call_output","call_id":"` + id + `","output":"ran ` + id + `"}`)
}

func doneItem(k int) session.Item {
	return session.MustItem(`{"type":"message","role":"assistant","content":"d` + strconv.Itoa(k) + `"}`)
}

// scriptKey names a script item: "user", "call", "out" or "done", and its
// run number; ok is false for an item the script never writes.
func scriptKey(it session.Item) (kind string, k int, ok bool) {
	var v struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content any    `json:"content"`
		CallID  string `json:"call_id"`
	}
	if json.Unmarshal(it.Bytes(), &v) != nil {
		return "", 0, false
	}
	num := func(s, prefix string) (int, bool) {
		if !strings.HasPrefix(s, prefix) {
			return 0, false
		}
		n, err := strconv.Atoi(s[len(prefix):])
		return n, err == nil && n > 0
	}
	c, _ := v.Content.(string)
	switch {
	case v.Type == "function_call":
		k, ok = num(v.CallID, "c")
		return "call", k, ok
	case v.Type == "function_call_output":
		k, ok = num(v.CallID, "c")
		return "out", k, ok
	case v.Role == "user":
		k, ok = num(c, "u")
		return "user", k, ok
	case v.Role == "assistant":
		k, ok = num(c, "d")
		return "done", k, ok
	}
	return "", 0, false
}

// toolSystem is the world an approved tool acts on: run performs the
// side effect (durable before it returns), ran asks whether it happened
// under a call id (the tool's idempotency key), and doubt records that a
// call was found in doubt.
type toolSystem struct {
	run   func(id string) error
	ran   func(id string) (bool, error)
	doubt func(id string, ran bool) error
}

// runScript drives the scripted conversation of n runs on s from wherever
// an earlier (killed) process left it: each run is Input(user k), Interrupt
// with call k awaiting approval (withheld), then Claim, the tool, Output
// and Settle, then Finish with the assistant's message. A call found in
// doubt (claimed by a killed process) is resolved by asking the tool's
// system: the output it reports if the tool ran, else a Reclaim and a run.
func runScript(ctx context.Context, s session.Session, n int, tool toolSystem) error {
	run, err := runstate.Open(ctx, s, runOpts)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	for {
		if ids := run.InDoubt(); len(ids) > 0 {
			for _, id := range ids {
				ran, err := tool.ran(id)
				if err != nil {
					return err
				}
				if err := tool.doubt(id, ran); err != nil {
					return err
				}
				if !ran {
					if err := run.Reclaim(ctx, id); err != nil {
						return fmt.Errorf("reclaim %s: %w", id, err)
					}
					if err := tool.run(id); err != nil {
						return err
					}
				}
				if err := run.Output(ctx, outputItem(id)); err != nil {
					return fmt.Errorf("output %s: %w", id, err)
				}
			}
			continue
		}
		if ids := run.Awaiting(); len(ids) > 0 {
			for _, id := range ids {
				if err := run.Claim(ctx, id); err != nil {
					return fmt.Errorf("claim %s: %w", id, err)
				}
				if err := tool.run(id); err != nil {
					return err
				}
				if err := run.Output(ctx, outputItem(id)); err != nil {
					return fmt.Errorf("output %s: %w", id, err)
				}
			}
			if err := run.Settle(ctx); err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			continue
		}
		if run.Next().Kind == runstate.NextSettle {
			if err := run.Settle(ctx); err != nil {
				return fmt.Errorf("settle held: %w", err)
			}
			continue
		}
		tail, err := session.Latest(ctx, s, 8)
		if err != nil {
			return err
		}
		k := 0
		have := map[string]bool{}
		for _, it := range tail {
			kind, j, ok := scriptKey(it)
			if !ok {
				return fmt.Errorf("an item the script never wrote: %s", it)
			}
			if j > k {
				k, have = j, map[string]bool{}
			}
			if j == k {
				have[kind] = true
			}
		}
		switch {
		case k == 0 || have["done"]:
			// Deletes a checkpoint a kill left after the final turn's
			// append (nothing when none is stored).
			if err := run.Finish(ctx, ""); err != nil {
				return fmt.Errorf("finish %d: %w", k, err)
			}
			if k >= n {
				return nil
			}
			if err := run.Input(ctx, userItem(k+1)); err != nil {
				return fmt.Errorf("input %d: %w", k+1, err)
			}
		case have["user"] && !have["call"] && !have["out"]:
			if err := run.Interrupt(ctx, "resp_c"+strconv.Itoa(k), []session.Item{callItem(k)}, callID(k)); err != nil {
				return fmt.Errorf("interrupt %d: %w", k, err)
			}
		case have["call"] && have["out"]:
			if err := run.Finish(ctx, "resp_d"+strconv.Itoa(k), doneItem(k)); err != nil {
				return fmt.Errorf("finish %d: %w", k, err)
			}
		default:
			return fmt.Errorf("run %d in an unexpected state %v (tail %v)", k, have, tail)
		}
	}
}

// TestRunChild is the child process of TestCrashLoopRun: it runs the
// script to its end (or until killed) and exits.
func TestRunChild(t *testing.T) {
	dsn := os.Getenv(envRunChild)
	if dsn == "" {
		t.Skip("only run as the front-door crash loop's child process")
	}
	ctx := context.Background()
	n, _ := strconv.Atoi(os.Getenv(envRunRuns))
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Session(os.Getenv(envRunSession))
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv(envRunTools)
	tools, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	doubts, err := os.OpenFile(path+".doubt", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	appendLine := func(f *os.File, line string) error {
		if _, err := fmt.Fprintln(f, line); err != nil {
			return err
		}
		return f.Sync()
	}
	fmt.Println("READY")
	err = runScript(ctx, s, n, toolSystem{
		// The tool's side effect, durable before the tool returns.
		run: func(id string) error { return appendLine(tools, id) },
		ran: func(id string) (bool, error) {
			b, err := os.ReadFile(path)
			return slices.Contains(strings.Fields(string(b)), id), err
		},
		doubt: func(id string, ran bool) error { return appendLine(doubts, fmt.Sprintf("%s %v", id, ran)) },
	})
	if err != nil {
		t.Fatalf("the script stopped: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("DONE")
}

// runKills is the number of kills per backend: CRASHTEST_KILLS, or a
// handful (the short setting of make test).
func runKills() (int, bool) {
	if n, err := strconv.Atoi(os.Getenv(EnvKills)); err == nil && n > 0 {
		return n, true
	}
	return 6, false
}

// backend is one store the front-door tests run on.
type backend struct {
	name    string
	dsn     func(t *testing.T) string
	proxied bool // the children reach the server through a fault proxy
}

func backends() []backend {
	stamp := func() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }
	return []backend{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "sessions.db") }, false},
		{"postgres", func(t *testing.T) string { return testservers.Postgres(t) }, true},
		{"redis-durable", func(t *testing.T) string { return testservers.NewRedisServer(t).URL() }, true},
		{"redis-cluster", func(t *testing.T) string {
			return "redis+cluster://" + strings.Join(testservers.RedisCluster(t), ",") + "?key_prefix=run" + stamp()
		}, false},
		{"mongo", func(t *testing.T) string {
			u, err := url.Parse(testservers.Mongo(t))
			require.NoError(t, err)
			u.Path = "/run" + stamp()
			return u.String()
		}, true},
	}
}

// openCheckpointed opens the session sid on dsn, and skips the test when
// the adapter's sessions keep no checkpoints (not implemented yet).
func openCheckpointed(t *testing.T, dsn, sid string) (adapters.Store, session.CheckpointStore) {
	t.Helper()
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	s, err := st.Session(sid)
	require.NoError(t, err)
	cs, ok := s.(session.CheckpointStore)
	if !ok {
		t.Skipf("%s: the adapter's sessions (%T) do not implement session.CheckpointStore yet", redactDSN(dsn), s)
	}
	_, atomic := s.(session.CheckpointCommitter)
	t.Logf("%s: CheckpointCommitter=%v", redactDSN(dsn), atomic)
	return st, cs
}

// child is a started child process whose stdout is collected.
type child struct {
	cmd   *exec.Cmd
	ready chan bool
	mu    sync.Mutex
	out   strings.Builder
	done  chan struct{}
	err   strings.Builder
}

func startChild(t *testing.T, run string, env ...string) *child {
	t.Helper()
	c := &child{ready: make(chan bool, 1), done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), env...)
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.cmd.Stderr = &c.err
	require.NoError(t, c.cmd.Start())
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
			if !sent && sc.Text() == "READY" {
				c.ready <- true
				sent = true
			}
		}
		if !sent {
			c.ready <- false
		}
	}()
	return c
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String() + c.err.String()
}

// wait waits for the child's exit and its output's end.
func (c *child) wait() {
	_ = c.cmd.Wait()
	<-c.done
}

// RunReport is what the front-door crash loop found.
type RunReport struct {
	Kills, Runs, Lost, Duplicated, SecondOutputs, Orphans, Misordered, Unexpected, ToolNeverRan, ToolReExecuted int
	// InDoubt counts calls found in doubt after a kill; InDoubtRan, those
	// whose tool had run.
	InDoubt, InDoubtRan int
}

func crashLoopRun(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.dsn(t)
	sid := "run-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, cs := openCheckpointed(t, dsn, sid)
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	childDSN := dsn
	var proxy *faultproxy.Proxy
	if b.proxied {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		proxy, err = faultproxy.Start(u.Host)
		require.NoError(t, err)
		defer proxy.Close()
		u.Host = proxy.Addr()
		childDSN = u.String()
	}
	kills, long := runKills()
	runs := max(10, kills)
	budget := 25 * time.Second
	if long {
		budget = 15 * time.Minute
	}
	deadline := time.Now().Add(budget)
	rng := rand.New(rand.NewPCG(20260101, uint64(len(b.name))))
	env := []string{envRunChild + "=" + childDSN, envRunSession + "=" + sid, envRunTools + "=" + tools, envRunRuns + "=" + strconv.Itoa(runs)}
	var rep RunReport
	for {
		final := rep.Kills >= kills || time.Now().After(deadline)
		c := startChild(t, "TestRunChild", env...)
		select {
		case ok := <-c.ready:
			if !ok {
				c.wait()
				t.Fatalf("child ended before it was ready: %s", c.output())
			}
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			c.wait()
			t.Fatalf("child not ready after 30 s: %s", c.output())
		}
		if final {
			exited := make(chan struct{})
			go func() { c.wait(); close(exited) }()
			select {
			case <-exited:
			case <-time.After(3 * time.Minute):
				_ = c.cmd.Process.Kill()
				<-exited
				t.Fatalf("the last child did not finish the script in 3 min: %s", c.output())
			}
			require.True(t, c.cmd.ProcessState.Success(), "the last child finishes the script: %s", c.output())
			break
		}
		time.Sleep(time.Duration(rng.IntN(60_000)) * time.Microsecond)
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		c.wait()
		ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() {
			require.True(t, c.cmd.ProcessState.Success(), "child %d failed: %s", rep.Kills, c.output())
			break // the script is complete
		}
		rep.Kills++
		if proxy != nil {
			require.True(t, proxy.Drain(30*time.Second), "the server finishes the dead child's requests")
		}
	}

	// The history: every item of the script once, in order.
	items, err := session.All(ctx, cs)
	require.NoError(t, err)
	count := map[string]int{}
	pos := map[string]int{}
	for i, it := range items {
		kind, k, ok := scriptKey(it)
		if !ok || k > runs {
			rep.Unexpected++
			t.Logf("unexpected item %d: %s", i, it)
			continue
		}
		key := kind + strconv.Itoa(k)
		count[key]++
		if _, seen := pos[key]; !seen {
			pos[key] = i
		}
	}
	order := []string{"user", "call", "out", "done"}
	last := -1
	for k := 1; k <= runs; k++ {
		for _, kind := range order {
			key := kind + strconv.Itoa(k)
			switch c := count[key]; {
			case c == 0:
				rep.Lost++
				continue
			case c > 1:
				rep.Duplicated += c - 1
			}
			if pos[key] < last {
				rep.Misordered++
			}
			last = pos[key]
		}
		if count["done"+strconv.Itoa(k)] > 0 {
			rep.Runs++
		}
	}
	for _, p := range history.Diagnose(items) {
		switch p.Kind {
		case history.ProblemDuplicateOutput:
			rep.SecondOutputs++
		case history.ProblemOrphanOutput:
			rep.Orphans++
		}
	}
	// The tools: each approved call ran at least once.
	execs := map[string]int{}
	if b, err := os.ReadFile(tools); err == nil {
		for _, id := range strings.Fields(string(b)) {
			execs[id]++
		}
	}
	for k := 1; k <= runs; k++ {
		switch c := execs[callID(k)]; {
		case c == 0:
			rep.ToolNeverRan++
		case c > 1:
			rep.ToolReExecuted += c - 1
		}
	}
	if b, err := os.ReadFile(tools + ".doubt"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				rep.InDoubt++
			}
			if strings.HasSuffix(l, " true") {
				rep.InDoubtRan++
			}
		}
	}
	cpDoc, _, cpErr := cs.LoadCheckpoint(ctx, runstate.DefaultName)
	if rep.Lost+rep.Duplicated+rep.Unexpected > 0 {
		for i, it := range items {
			t.Logf("%d: %s", i, it)
		}
	}
	t.Logf("run crash loop %-13s kills=%d runs=%d/%d lost=%d duplicated=%d second-outputs=%d orphans=%d misordered=%d unexpected=%d tool-never-ran=%d tool-re-executed=%d in-doubt=%d (tool had run: %d)",
		b.name, rep.Kills, rep.Runs, runs, rep.Lost, rep.Duplicated, rep.SecondOutputs, rep.Orphans, rep.Misordered, rep.Unexpected, rep.ToolNeverRan, rep.ToolReExecuted, rep.InDoubt, rep.InDoubtRan)
	require.Equal(t, runs, rep.Runs, "every run completed")
	require.Zero(t, rep.Lost, "lost items")
	require.Zero(t, rep.Duplicated, "duplicated items")
	require.Zero(t, rep.SecondOutputs, "second outputs")
	require.Zero(t, rep.Orphans, "orphan outputs")
	require.Zero(t, rep.Misordered, "misordered items")
	require.Zero(t, rep.Unexpected, "unexpected items")
	require.Zero(t, rep.ToolNeverRan, "an answered call whose tool never ran")
	require.Zero(t, rep.ToolReExecuted, "a claimed tool ran twice")
	require.True(t, errors.Is(cpErr, session.ErrNoCheckpoint) || cpErr == nil && runstate.Idle(cpDoc), "the finished script leaves no run behind: %v", cpErr)
}

// TestCrashLoopRun kills children driving runstate.Run through a scripted
// conversation at random instants, then checks the history and the tools'
// executions.
func TestCrashLoopRun(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { crashLoopRun(t, b) })
	}
}

// TestTwoCopiesChild is a child process of TestTwoCopies. It reads
// commands on stdin: "open SESSION" opens a Run on it and answers "opened
// N" (N calls awaiting); "go" answers each awaited call and settles, and
// answers "result settled|conflict|none|error MESSAGE".
func TestTwoCopiesChild(t *testing.T) {
	dsn := os.Getenv(envTwoChild)
	if dsn == "" {
		t.Skip("only run as the two-copies race's child process")
	}
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := os.OpenFile(os.Getenv(envTwoTools), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	var run *runstate.Run
	var sid string
	classify := func(err error) string {
		switch {
		case errors.Is(err, session.ErrCheckpointConflict):
			return "conflict"
		case errors.Is(err, runstate.ErrNotAwaiting):
			return "none"
		}
		return "error " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "open":
			sid = f[1]
			s, err := st.Session(sid)
			if err == nil {
				run, err = runstate.Open(ctx, s, runOpts)
			}
			if err != nil {
				run = nil
				fmt.Println("opened error", strings.ReplaceAll(err.Error(), "\n", " "))
				continue
			}
			fmt.Println("opened", len(run.Awaiting()))
		case len(f) == 1 && f[0] == "go":
			if run == nil || len(run.Awaiting()) == 0 {
				fmt.Println("result none")
				continue
			}
			res := "settled"
			for _, id := range run.Awaiting() {
				if err := run.Claim(ctx, id); err != nil {
					res = classify(err)
					break
				}
				// The tool's side effect, durable before it returns.
				if _, err := fmt.Fprintln(tools, sid, id); err != nil {
					t.Fatal(err)
				}
				if err := tools.Sync(); err != nil {
					t.Fatal(err)
				}
				if err := run.Output(ctx, outputItem(id)); err != nil {
					res = classify(err)
					break
				}
			}
			if res == "settled" {
				if err := run.Settle(ctx); err != nil {
					res = classify(err)
				}
			}
			fmt.Println("result", res)
		}
	}
}

// copyChild is a long-lived TestTwoCopiesChild.
type copyChild struct {
	stdin *os.File
	lines chan string
}

func startCopy(t *testing.T, dsn, tools string) *copyChild {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cc := &copyChild{stdin: w, lines: make(chan string, 16)}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTwoCopiesChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envTwoChild+"="+dsn, envTwoTools+"="+tools)
	cmd.Stdin = r
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	_ = r.Close()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			cc.lines <- sc.Text()
		}
		close(cc.lines)
	}()
	t.Cleanup(func() { _ = w.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Equal(t, "READY", cc.next(t, "READY"))
	return cc
}

// next returns the child's next line with the given prefix.
func (cc *copyChild) next(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-cc.lines:
			if !ok {
				t.Fatalf("the child ended waiting for %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			t.Logf("child: %s", l)
		case <-timeout:
			t.Fatalf("no %q from the child in 60 s", prefix)
		}
	}
}

func (cc *copyChild) send(t *testing.T, line string) {
	t.Helper()
	_, err := fmt.Fprintln(cc.stdin, line)
	require.NoError(t, err)
}

func twoCopies(t *testing.T, b backend) {
	ctx := context.Background()
	dsn := b.dsn(t)
	st, _ := openCheckpointed(t, dsn, "two-probe")
	tools := filepath.Join(t.TempDir(), "tools")
	a, c := startCopy(t, dsn, tools), startCopy(t, dsn, tools)
	rounds := 20
	var settled, conflicts, none, calls, outputs, problems, toolRuns int
	for i := range rounds {
		sid := "two-" + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		s, err := st.Session(sid)
		require.NoError(t, err)
		run, err := runstate.Open(ctx, s, runOpts)
		require.NoError(t, err)
		require.NoError(t, run.Input(ctx, userItem(1)))
		require.NoError(t, run.Interrupt(ctx, "resp_1", []session.Item{callItem(1)}, callID(1)))
		for _, cc := range []*copyChild{a, c} {
			cc.send(t, "open "+sid)
		}
		for _, cc := range []*copyChild{a, c} {
			require.Equal(t, "opened 1", cc.next(t, "opened"), "round %d: both copies load the interrupted checkpoint", i)
		}
		for _, cc := range []*copyChild{a, c} {
			cc.send(t, "go")
		}
		res := map[string]int{}
		for _, cc := range []*copyChild{a, c} {
			l := strings.TrimPrefix(cc.next(t, "result"), "result ")
			if strings.HasPrefix(l, "error") {
				t.Errorf("round %d: %s", i, l)
			}
			res[l]++
		}
		settled += res["settled"]
		conflicts += res["conflict"]
		none += res["none"]
		require.Equal(t, 1, res["settled"], "round %d: exactly one copy settles: %v", i, res)
		items, err := session.All(ctx, s)
		require.NoError(t, err)
		var nc, no int
		for _, it := range items {
			switch kind, _, _ := scriptKey(it); kind {
			case "call":
				nc++
			case "out":
				no++
			}
		}
		calls += nc
		outputs += no
		problems += len(history.Diagnose(items))
		require.Len(t, items, 3, "round %d: user, call, output: %v", i, items)
		b, err := os.ReadFile(tools)
		require.NoError(t, err)
		ran := strings.Count(string(b), sid+" ")
		toolRuns += ran
		require.Equal(t, 1, ran, "round %d: the tool ran once", i)
		require.Equal(t, 1, nc, "round %d: one call", i)
		require.Equal(t, 1, no, "round %d: one output", i)
	}
	t.Logf("two copies %-13s rounds=%d settled=%d conflicts=%d no-awaited-call=%d calls=%d outputs=%d tool-runs=%d problems=%d",
		b.name, rounds, settled, conflicts, none, calls, outputs, toolRuns, problems)
	require.Zero(t, problems)
}

// TestTwoCopies: two processes open one interrupted checkpoint and both
// answer and settle; exactly one settles, the session holds one call and
// one output.
func TestTwoCopies(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { twoCopies(t, b) })
	}
}
