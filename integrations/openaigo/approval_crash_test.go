package openaigo_test

// The approval flow with a child process SIGKILLed at every step: the
// test binary re-executes itself as the child (as internal/testkit/crashtest
// does), the child drives approvalLoop on an SQLite file and kills itself
// at the K-th step, where the steps are every write to the store (before
// and after each AddItems, SaveCheckpoint, AppendWithCheckpoint and
// DeleteCheckpoint), every model call (before the request, after the
// response) and every tool execution (after its side effect, before its
// output is recorded). For every K a second child recovering from that
// kill is killed again early in its recovery, and a third finishes the
// conversation; the parent then checks the history.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

const (
	envApprovalChild = "OPENAIGO_APPROVAL_CHILD" // the SQLite URL
	envApprovalSID   = "OPENAIGO_APPROVAL_SESSION"
	envApprovalTools = "OPENAIGO_APPROVAL_TOOLS"
	envApprovalRuns  = "OPENAIGO_APPROVAL_RUNS"
	envApprovalAPI   = "OPENAIGO_APPROVAL_API"
	envApprovalKill  = "OPENAIGO_APPROVAL_KILL_AT" // the step to die at; 0: none
	envApprovalMode  = "OPENAIGO_APPROVAL_MODE"    // "atomic" or "digest"
)

// hooked is a session whose writes call hook before and after, keeping
// the checkpoint capabilities of the session it wraps: with atomic, the
// session's CheckpointCommitter (runstate commits an append and its
// checkpoint in one transaction); without, only CheckpointStore (runstate's
// digest protocol).
type hooked struct {
	inner session.Session
	hook  func(string)
}

func (h hooked) SessionID() string                                 { return h.inner.SessionID() }
func (h hooked) Items(ctx context.Context) ([]session.Item, error) { return h.inner.Items(ctx) }
func (h hooked) PopItem(ctx context.Context) (session.Item, bool, error) {
	return h.inner.PopItem(ctx)
}
func (h hooked) Clear(ctx context.Context) error { return h.inner.Clear(ctx) }
func (h hooked) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	return session.Latest(ctx, h.inner, n)
}
func (h hooked) AddItems(ctx context.Context, items []session.Item) error {
	h.hook("before AddItems")
	err := h.inner.AddItems(ctx, items)
	h.hook("after AddItems")
	return err
}
func (h hooked) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	return h.inner.(session.CheckpointStore).LoadCheckpoint(ctx, name)
}
func (h hooked) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	h.hook("before SaveCheckpoint")
	v, err := h.inner.(session.CheckpointStore).SaveCheckpoint(ctx, name, doc, version)
	h.hook("after SaveCheckpoint")
	return v, err
}
func (h hooked) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	h.hook("before DeleteCheckpoint")
	err := h.inner.(session.CheckpointStore).DeleteCheckpoint(ctx, name, version)
	h.hook("after DeleteCheckpoint")
	return err
}
func (h hooked) ListCheckpoints(ctx context.Context) ([]string, error) {
	return h.inner.(session.CheckpointStore).ListCheckpoints(ctx)
}

type hookedAtomic struct{ hooked }

func (h hookedAtomic) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	h.hook("before AppendWithCheckpoint")
	v, err := h.inner.(session.CheckpointCommitter).AppendWithCheckpoint(ctx, items, name, doc, version)
	h.hook("after AppendWithCheckpoint")
	return v, err
}

// TestApprovalChild is the child process: it runs approvalLoop to the end
// (or until it kills itself) and exits.
func TestApprovalChild(t *testing.T) {
	dsn := os.Getenv(envApprovalChild)
	if dsn == "" {
		t.Skip("only run as the approval crash loop's child process")
	}
	ctx := context.Background()
	n, _ := strconv.Atoi(os.Getenv(envApprovalRuns))
	killAt, _ := strconv.Atoi(os.Getenv(envApprovalKill))
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := st.Session(os.Getenv(envApprovalSID))
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	var trace []string
	hook := func(what string) {
		steps++
		trace = append(trace, what)
		if steps == killAt {
			fmt.Printf("KILLED at step %d: %s\n", steps, what)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	h := hooked{inner: inner, hook: hook}
	var s session.Session = h
	if os.Getenv(envApprovalMode) == "atomic" {
		s = hookedAtomic{h}
	}
	tools, err := os.OpenFile(os.Getenv(envApprovalTools), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("READY")
	client := newClient(os.Getenv(envApprovalAPI))
	err = approvalLoop(ctx, s, client, n, toolSystem{
		run: func(call session.Item) error {
			// The tool's side effect, durable before the tool returns.
			if _, err := fmt.Fprintln(tools, call.CallID()); err != nil {
				return err
			}
			if err := tools.Sync(); err != nil {
				return err
			}
			hook("after the tool ran")
			return nil
		},
		acted: func(callID string) (bool, error) { return toolActed(os.Getenv(envApprovalTools), callID) },
		// Written before the step that follows it, so the parent reads
		// every event of a child killed after it.
		note: func(event, callID string) { fmt.Printf("EVENT %s %s\n", event, callID) },
	}, hook)
	if err != nil {
		t.Fatalf("the loop stopped: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("STEPS %d %s\n", steps, strings.Join(trace, "|"))
	fmt.Println("DONE")
}

// approvalChild is one started child.
type approvalChild struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	errb bytes.Buffer
}

func runApprovalChild(t *testing.T, env []string, killAt int) (killed bool, out string) {
	t.Helper()
	c := &approvalChild{}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestApprovalChild$", "-test.count=1")
	c.cmd.Env = append(append(os.Environ(), env...), envApprovalKill+"="+strconv.Itoa(killAt))
	c.cmd.Stdout = &c.out
	c.cmd.Stderr = &c.errb
	done := make(chan error, 1)
	require.NoError(t, c.cmd.Start())
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = c.cmd.Process.Kill()
		<-done
		t.Fatalf("child did not end in 2 min: %s%s", c.out.String(), c.errb.String())
	}
	ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	out = c.out.String() + c.errb.String()
	if ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, out
	}
	require.True(t, c.cmd.ProcessState.Success(), "child (kill at %d) failed: %s", killAt, out)
	return false, out
}

// killReport is what one verification found.
type killReport struct {
	Scenarios, Kills, Runs, Lost, Duplicated, SecondOutputs, Orphans, Misordered, Unexpected int
	ToolNeverRan, ToolReExecuted, Rejected, CheckpointsLeft, ByteIdentical, KeyOrderOnly     int
	// Claims: the tool's side effects counted (ToolRuns), the children's
	// claim events (claimed, lost to another claimer, in doubt at an Open,
	// resolved from the tool's system, reclaimed), unanswered calls, and
	// re-executions of a call no reclaim after an in-doubt report allowed.
	ToolRuns, Claimed, Conflicts, InDoubt, Found, Reclaimed, Unanswered, UnreportedReRuns int
}

func (r *killReport) add(o killReport) {
	r.Scenarios += o.Scenarios
	r.Kills += o.Kills
	r.Runs += o.Runs
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.SecondOutputs += o.SecondOutputs
	r.Orphans += o.Orphans
	r.Misordered += o.Misordered
	r.Unexpected += o.Unexpected
	r.ToolNeverRan += o.ToolNeverRan
	r.ToolReExecuted += o.ToolReExecuted
	r.Rejected += o.Rejected
	r.CheckpointsLeft += o.CheckpointsLeft
	r.ByteIdentical += o.ByteIdentical
	r.KeyOrderOnly += o.KeyOrderOnly
	r.ToolRuns += o.ToolRuns
	r.Claimed += o.Claimed
	r.Conflicts += o.Conflicts
	r.InDoubt += o.InDoubt
	r.Found += o.Found
	r.Reclaimed += o.Reclaimed
	r.Unanswered += o.Unanswered
	r.UnreportedReRuns += o.UnreportedReRuns
}

// toolActed is the tool's system answering whether it acted on callID:
// the side-effect log holds a line for every execution.
func toolActed(path, callID string) (bool, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == callID {
			return true, nil
		}
	}
	return false, nil
}

// events counts the EVENT lines of the children's output, in order, and
// per call the reclaims that followed an in-doubt report of that call.
func events(out string) (counts map[string]int, reclaims map[string]int) {
	counts, reclaims = map[string]int{}, map[string]int{}
	reported := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := strings.CutPrefix(line, "EVENT ")
		if !ok {
			continue
		}
		ev, id, _ := strings.Cut(rest, " ")
		counts[ev]++
		switch ev {
		case "in-doubt":
			reported[id] = true
		case "reclaim":
			if reported[id] {
				reclaims[id]++
			}
		}
	}
	return counts, reclaims
}

// verifyApproval checks the finished conversation at dsn.
// out is every child's output, in the order they ran.
func verifyApproval(t *testing.T, api *fakeAPI, dsn, sid, tools string, n int, out string) killReport {
	t.Helper()
	ctx := context.Background()
	var r killReport
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session(sid)
	require.NoError(t, err)
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	want := map[string]string{} // expected bytes by item
	order := map[string]int{}
	for k := 1; k <= n; k++ {
		for i, e := range approvalExpected(k) {
			key := canonical(e)
			want[key] = e
			order[key] = (k-1)*100 + i
		}
	}
	count := map[string]int{}
	last := -1
	for _, it := range items {
		key := canonical(string(it.Bytes()))
		exp, ok := want[key]
		if !ok {
			r.Unexpected++
			t.Logf("unexpected item: %s", it)
			continue
		}
		count[key]++
		if count[key] == 1 {
			if order[key] < last {
				r.Misordered++
			}
			last = order[key]
			if exp == string(it.Bytes()) {
				r.ByteIdentical++
			} else {
				r.KeyOrderOnly++
			}
		}
	}
	for key := range want {
		switch c := count[key]; {
		case c == 0:
			r.Lost++
		case c > 1:
			r.Duplicated += c - 1
		}
	}
	for k := 1; k <= n; k++ {
		if count[canonical(approvalExpected(k)[8])] > 0 {
			r.Runs++
		}
	}
	for _, p := range history.Diagnose(items) {
		switch p.Kind {
		case history.ProblemDuplicateOutput:
			r.SecondOutputs++
		case history.ProblemOrphanOutput:
			r.Orphans++
		case history.ProblemUnansweredCall:
			r.Unanswered++
		}
	}
	counts, reclaims := events(out)
	r.Claimed, r.Conflicts, r.InDoubt, r.Found, r.Reclaimed = counts["claimed"], counts["conflict"], counts["in-doubt"], counts["found"], counts["reclaim"]
	execs := map[string]int{}
	for _, id := range readLines(t, tools) {
		execs[id]++
		r.ToolRuns++
	}
	for k := 1; k <= n; k++ {
		id := "c" + strconv.Itoa(k)
		switch c := execs[id]; {
		case c == 0:
			r.ToolNeverRan++
		case c > 1:
			r.ToolReExecuted += c - 1
			r.UnreportedReRuns += max(0, c-1-reclaims[id])
		}
	}
	r.CheckpointsLeft = len(runsLeft(t, s))
	// The final history is one the API accepts as a whole.
	_, _, before := api.stats()
	client := newClient(api.URL())
	params, err := openaigo.New(s, openaigo.Options{}).Params(ctx, e2eBase)
	require.NoError(t, err)
	_, err = client.Responses.New(ctx, params)
	if err != nil {
		t.Logf("the final history is rejected: %s", apiMessage(err))
	}
	_, _, after := api.stats()
	r.Rejected = len(after) - len(before)
	if r.Lost+r.Duplicated+r.Unexpected+r.Misordered > 0 {
		for i, it := range items {
			t.Logf("%d: %s", i, it)
		}
	}
	return r
}

// canonical is an item's JSON with sorted keys: what identifies it
// whatever key order it came back in.
func canonical(s string) string {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type approvalEnv struct {
	dsn, sid, tools string
	env             []string
}

func newApprovalEnv(t *testing.T, api *fakeAPI, mode string, runs int) approvalEnv {
	return newApprovalEnvAt(t, api, mode, runs, "sqlite://"+filepath.Join(t.TempDir(), "agent.db"))
}

// newApprovalEnvAt is newApprovalEnv on the store at dsn.
func newApprovalEnvAt(t *testing.T, api *fakeAPI, mode string, runs int, dsn string) approvalEnv {
	dir := t.TempDir()
	e := approvalEnv{dsn: dsn, sid: "approval-1", tools: filepath.Join(dir, "tools")}
	e.env = []string{envApprovalChild + "=" + e.dsn, envApprovalSID + "=" + e.sid, envApprovalTools + "=" + e.tools,
		envApprovalRuns + "=" + strconv.Itoa(runs), envApprovalAPI + "=" + api.URL(), envApprovalMode + "=" + mode}
	return e
}

func checkReport(t *testing.T, r killReport, runs int) {
	t.Helper()
	require.Equal(t, runs*r.Scenarios, r.Runs, "every run completed")
	require.Zero(t, r.Lost, "lost items")
	require.Zero(t, r.Duplicated, "duplicated items")
	require.Zero(t, r.SecondOutputs, "second outputs")
	require.Zero(t, r.Orphans, "orphan outputs")
	require.Zero(t, r.Misordered, "misordered items")
	require.Zero(t, r.Unexpected, "unexpected items")
	require.Zero(t, r.Unanswered, "unanswered calls")
	require.Zero(t, r.ToolNeverRan, "an answered call whose tool never ran")
	require.Zero(t, r.UnreportedReRuns, "a tool ran again with no in-doubt report and reclaim first")
	require.Zero(t, r.ToolReExecuted, "a claimed tool ran twice (the loop reclaims only calls the tool's system never acted on)")
	require.Equal(t, r.Runs, r.ToolRuns, "the tool ran exactly once per run")
	require.Zero(t, r.Rejected, "the API rejects the final history")
	require.Zero(t, r.CheckpointsLeft, "checkpoints left behind")
}

func TestApprovalKilledAtEveryStep(t *testing.T) {
	const runs = 2
	var table []string
	for _, mode := range []string{"atomic", "digest"} {
		t.Run(mode, func(t *testing.T) {
			api := newFakeAPI(t, approvalAPI)
			// The reference run, never killed, counts the steps.
			ref := newApprovalEnv(t, api, mode, runs)
			killed, out := runApprovalChild(t, ref.env, 0)
			require.False(t, killed)
			var steps int
			var trace string
			for line := range strings.SplitSeq(out, "\n") {
				if rest, ok := strings.CutPrefix(line, "STEPS "); ok {
					num, tr, _ := strings.Cut(rest, " ")
					steps, _ = strconv.Atoi(num)
					trace = tr
				}
			}
			require.Positive(t, steps, out)
			total := verifyApproval(t, api, ref.dsn, ref.sid, ref.tools, runs, out)
			total.Scenarios = 1
			var mu sync.Mutex
			t.Run("kills", func(t *testing.T) {
				for k := 1; k <= steps; k++ {
					t.Run(strconv.Itoa(k), func(t *testing.T) {
						t.Parallel()
						e := newApprovalEnv(t, api, mode, runs)
						var r killReport
						killed, out1 := runApprovalChild(t, e.env, k)
						require.True(t, killed, "the child dies at step %d: %s", k, out1)
						r.Kills++
						// Killed again early in the recovery, where Open lands what the first left.
						killed, out2 := runApprovalChild(t, e.env, 1+(k-1)%4)
						if killed {
							r.Kills++
						}
						killed, out3 := runApprovalChild(t, e.env, 0)
						require.False(t, killed, out3)
						v := verifyApproval(t, api, e.dsn, e.sid, e.tools, runs, out1+out2+out3)
						v.Kills, v.Scenarios = r.Kills, 1
						mu.Lock()
						total.add(v)
						mu.Unlock()
					})
				}
			})
			_, _, rejected := api.stats()
			line := fmt.Sprintf("%-6s steps=%d scenarios=%d kills=%d runs=%d lost=%d duplicated=%d second-outputs=%d orphans=%d misordered=%d unexpected=%d tool-runs=%d tool-never-ran=%d tool-re-executed=%d in-doubt=%d found=%d reclaimed=%d api-rejections=%d checkpoints-left=%d items byte-identical=%d key-order-only=%d",
				mode, steps, total.Scenarios, total.Kills, total.Runs, total.Lost, total.Duplicated, total.SecondOutputs, total.Orphans, total.Misordered, total.Unexpected,
				total.ToolRuns, total.ToolNeverRan, total.ToolReExecuted, total.InDoubt, total.Found, total.Reclaimed, len(rejected), total.CheckpointsLeft, total.ByteIdentical, total.KeyOrderOnly)
			t.Logf("%s\nsteps of one conversation: %s", line, trace)
			table = append(table, line)
			checkReport(t, total, runs)
			require.Empty(t, rejected, "the API rejected a request of the loop")
		})
	}
	t.Logf("kill table (%d runs per conversation):\n%s", runs, strings.Join(table, "\n"))
}

// TestApprovalRandomKills kills children at random instants (inside SQL
// statements, Redis scripts and HTTP exchanges too), as
// internal/testkit/crashtest does, on SQLite, Redis and PostgreSQL. The
// loop claims before the tool's side effect; a child that finds a call in
// doubt asks the tool's system (the side-effect log) and records the
// output found, or reclaims the call when the tool never acted. Across
// the rounds: no call's tool runs twice, none runs again without an
// in-doubt report and a reclaim first, and the history is whole.
func TestApprovalRandomKills(t *testing.T) {
	const runs, kills = 12, 30
	var mu sync.Mutex
	var table []string
	for _, b := range []string{"sqlite", "redis", "postgres"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, approvalAPI)
			e := newApprovalEnvAt(t, api, "atomic", runs, backendURL(t, b))
			rng := rand.New(rand.NewPCG(2026, uint64(len(b))))
			var outs strings.Builder
			r := killReport{Scenarios: 1}
			for r.Kills < kills {
				c := exec.Command(os.Args[0], "-test.run=^TestApprovalChild$", "-test.count=1")
				c.Env = append(append(os.Environ(), e.env...), envApprovalKill+"=0")
				stdout, err := c.StdoutPipe()
				require.NoError(t, err)
				var stderr bytes.Buffer
				c.Stderr = &stderr
				require.NoError(t, c.Start())
				ready, read := make(chan struct{}), make(chan string, 1)
				go func() {
					var out strings.Builder
					sc := bufio.NewScanner(stdout)
					sent := false
					for sc.Scan() {
						out.WriteString(sc.Text() + "\n")
						if !sent && sc.Text() == "READY" {
							close(ready)
							sent = true
						}
					}
					if !sent {
						close(ready)
					}
					read <- out.String()
				}()
				<-ready
				time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
				_ = c.Process.Signal(syscall.SIGKILL)
				outs.WriteString(<-read)
				_ = c.Wait()
				ws, _ := c.ProcessState.Sys().(syscall.WaitStatus)
				if !ws.Signaled() {
					require.True(t, c.ProcessState.Success(), "child failed: %s", stderr.String())
					break // finished before the kill
				}
				r.Kills++
			}
			killed, out := runApprovalChild(t, e.env, 0)
			require.False(t, killed, out)
			outs.WriteString(out)
			v := verifyApproval(t, api, e.dsn, e.sid, e.tools, runs, outs.String())
			v.Kills, v.Scenarios = r.Kills, 1
			_, _, rejected := api.stats()
			line := fmt.Sprintf("%-8s kills=%d runs=%d/%d tool-runs=%d claims=%d in-doubt=%d found=%d reclaimed=%d tool-re-executed=%d unreported-re-runs=%d lost=%d duplicated=%d second-outputs=%d orphans=%d unanswered=%d misordered=%d unexpected=%d tool-never-ran=%d api-rejections=%d checkpoints-left=%d",
				b, v.Kills, v.Runs, runs, v.ToolRuns, v.Claimed, v.InDoubt, v.Found, v.Reclaimed, v.ToolReExecuted, v.UnreportedReRuns, v.Lost, v.Duplicated, v.SecondOutputs, v.Orphans, v.Unanswered, v.Misordered, v.Unexpected, v.ToolNeverRan, len(rejected), v.CheckpointsLeft)
			t.Logf("random kills: %s", line)
			mu.Lock()
			table = append(table, line)
			mu.Unlock()
			checkReport(t, v, runs)
			require.Empty(t, rejected)
		})
	}
	t.Cleanup(func() {
		t.Logf("random kills with claims (%d runs per conversation):\n%s", runs, strings.Join(table, "\n"))
	})
}

// backendURL returns a fresh store URL of the named backend: a new SQLite
// file, or a new key prefix or table on the test servers.
func backendURL(t *testing.T, name string) string {
	t.Helper()
	for _, b := range storetest.Backends() {
		if b.Name == name {
			return b.URL(t)
		}
	}
	t.Fatalf("no backend %q", name)
	return ""
}

// TestApprovalFlow is the flow in one test process, two store handles
// for two processes: the response parks on the checkpoint (nothing of it
// reaches the session), a new process approves, runs the tool, settles,
// asks the model again and finishes.
func TestApprovalFlow(t *testing.T) {
	ctx := context.Background()
	api := newFakeAPI(t, approvalAPI)
	client := newClient(api.URL())
	dsn := sqliteURL(t)
	open := func() (adapters.Store, session.Session) {
		st, err := adapters.Open(ctx, dsn)
		require.NoError(t, err)
		s, err := st.Session("conv-1")
		require.NoError(t, err)
		return st, s
	}

	// Process 1.
	st, s := open()
	run, err := runstate.Open(ctx, s, approvalOpts)
	require.NoError(t, err)
	h := openaigo.New(s, openaigo.Options{})
	require.NoError(t, h.AddJSON(ctx)) // no-op
	require.NoError(t, openaigo.RunInput(ctx, run, openaigo.InputParam(session.MustItem(approvalUser(1)))))
	params, err := h.Params(ctx, e2eBase)
	require.NoError(t, err)
	resp, err := client.Responses.New(ctx, params)
	require.NoError(t, err)
	items, err := openaigo.OutputItems(resp)
	require.NoError(t, err)
	ids := openaigo.NeedsApproval(items, needsApproval)
	require.Equal(t, []string{"c1", "mcpr_1"}, ids)
	require.NoError(t, openaigo.Interrupt(ctx, run, resp, ids))
	all, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Equal(t, []string{approvalUser(1)}, texts(all), "the withheld turn is not in the session")
	names, err := s.(session.CheckpointStore).ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{runstate.DefaultName}, names, "the checkpoint is in the same store")
	require.NoError(t, st.Close())

	// Process 2.
	st, s = open()
	defer st.Close()
	run, err = runstate.Open(ctx, s, approvalOpts)
	require.NoError(t, err)
	require.Equal(t, []string{"c1", "mcpr_1"}, run.Awaiting())
	calls, err := openaigo.AwaitingCalls(ctx, run, s)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	require.Equal(t, canonical(approvalFirst(1)[1]), canonical(calls[0].String()))
	require.NoError(t, openaigo.Output(ctx, run, openaigo.InputParam(session.MustItem(approvalToolOutput("c1")))))
	require.NoError(t, openaigo.Output(ctx, run, openaigo.InputParam(session.MustItem(approvalMCPResponse("mcpr_1")))))
	require.NoError(t, run.Settle(ctx))
	h = openaigo.New(s, openaigo.Options{})
	params, err = h.Params(ctx, e2eBase)
	require.NoError(t, err)
	resp, err = client.Responses.New(ctx, params)
	require.NoError(t, err)
	require.NoError(t, openaigo.Finish(ctx, run, resp))

	all, err = session.All(ctx, s)
	require.NoError(t, err)
	want := approvalExpected(1)
	require.Len(t, all, len(want))
	for i := range want {
		require.Equal(t, canonical(want[i]), canonical(all[i].String()), "item %d", i)
	}
	doc, _, err := s.(session.CheckpointStore).LoadCheckpoint(ctx, runstate.DefaultName)
	require.True(t, errors.Is(err, session.ErrNoCheckpoint) || err == nil && runstate.Idle(doc), "the finished run leaves no run behind (%v):\n%s", err, doc)
	_, _, rejected := api.stats()
	require.Empty(t, rejected)
	var sorted []int
	for i := range want {
		if want[i] != all[i].String() {
			sorted = append(sorted, i)
		}
	}
	t.Logf("items that rode the checkpoint and came back with sorted keys (JSON-equal, not byte-identical): %v of %d", sorted, len(want))
}
