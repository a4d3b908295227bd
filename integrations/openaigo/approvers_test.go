package openaigo_test

// Two approvers at once: two OS processes (the test binary re-executed,
// as approval_crash_test.go does) resume one parked run at the same
// instant, each approving the call and running its tool under a claim
// (RunTool). The parent parks a fresh run per try, tells both children to
// go with one write each, finishes the run itself, and checks that the
// tool's side effect (a line appended to a file) happened exactly once.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/integrations/openaigo"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

const (
	envApproverChild = "OPENAIGO_APPROVER_CHILD" // the store URL
	envApproverDir   = "OPENAIGO_APPROVER_DIR"   // where each try's side-effect log is
)

// appendTool is the approved tool's side effect: a line with the call id
// appended to path, durable before it returns.
func appendTool(path string) func(call session.Item) error {
	return func(call session.Item) error {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(f, call.CallID()); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	}
}

// TestApproverChild is one approver: for each line "GO <session>" on its
// stdin it opens that session's parked run and approves what awaits (the
// function call through RunTool, the MCP request by its response), then
// settles; it answers "RESULT <session> <outcome>".
func TestApproverChild(t *testing.T) {
	dsn := os.Getenv(envApproverChild)
	if dsn == "" {
		t.Skip("only run as the two-approvers test's child process")
	}
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		sid, ok := strings.CutPrefix(in.Text(), "GO ")
		if !ok {
			t.Fatalf("unexpected line %q", in.Text())
		}
		s, err := st.Session(sid)
		if err != nil {
			t.Fatal(err)
		}
		outcome, err := approveOnce(ctx, s, appendTool(filepath.Join(os.Getenv(envApproverDir), sid)))
		if err != nil {
			t.Fatalf("session %s: %v", sid, err)
		}
		fmt.Printf("RESULT %s %s\n", sid, outcome)
	}
}

// approveOnce is what an approver does with a parked run: the outcome is
// "ran" (it claimed and ran the tool), "conflict" (another claimed first:
// its claim or an output lost to the other's save), "in-doubt" (it opened
// after the other's claim), or "nothing" (the other had finished).
func approveOnce(ctx context.Context, s session.Session, tool func(session.Item) error) (string, error) {
	run, err := runstate.Open(ctx, s, approvalOpts)
	if err != nil {
		return "", fmt.Errorf("open: %w", err)
	}
	lost := func(err error) (string, error) {
		switch {
		case errors.Is(err, runstate.ErrInDoubt):
			return "in-doubt", nil
		case errors.Is(err, session.ErrCheckpointConflict), errors.Is(err, runstate.ErrNotAwaiting):
			return "conflict", nil
		}
		return "", err
	}
	switch next := run.Next(); next.Kind {
	case runstate.NextResolve:
		return "in-doubt", nil
	case runstate.NextApproval:
	default:
		return "nothing", nil
	}
	calls, err := openaigo.AwaitingCalls(ctx, run, s)
	if err != nil {
		return "", err
	}
	ran := false
	for _, c := range calls {
		if c.Type() == "mcp_approval_request" {
			if err := openaigo.Output(ctx, run, openaigo.InputParam(session.MustItem(approvalMCPResponse(c.ID())))); err != nil {
				return lost(err)
			}
			continue
		}
		err := openaigo.RunTool(ctx, run, c, func(_ context.Context, call session.Item) (responses.ResponseInputItemUnionParam, error) {
			if err := tool(call); err != nil {
				return responses.ResponseInputItemUnionParam{}, err
			}
			ran = true
			return openaigo.InputParam(session.MustItem(approvalToolOutput(call.CallID()))), nil
		})
		if err != nil {
			if ran {
				return "", fmt.Errorf("the tool ran, then: %w", err)
			}
			return lost(err)
		}
	}
	if err := run.Settle(ctx); err != nil {
		if ran {
			return "ran", nil // the other settled: the outputs are on the checkpoint
		}
		return lost(err)
	}
	if ran {
		return "ran", nil
	}
	return "nothing", nil
}

// approverProc is a started approver child.
type approverProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr lockedBuffer
}

// lockedBuffer is a bytes.Buffer that exec's copying goroutine writes
// while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startApprover(t *testing.T, dsn, dir string) *approverProc {
	t.Helper()
	p := &approverProc{cmd: exec.Command(os.Args[0], "-test.run=^TestApproverChild$", "-test.count=1")}
	p.cmd.Env = append(os.Environ(), envApproverChild+"="+dsn, envApproverDir+"="+dir)
	p.cmd.Stderr = &p.stderr
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	p.lines = bufio.NewScanner(out)
	t.Cleanup(func() {
		_ = p.stdin.Close()
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("approver: %v: %s", err, p.stderr.String())
		}
	})
	p.expect(t, "READY")
	return p
}

// expect reads lines until one starts with prefix and returns it.
// The lines skipped are kept: a failing child test reports on stdout.
func (p *approverProc) expect(t *testing.T, prefix string) string {
	t.Helper()
	var skipped []string
	for p.lines.Scan() {
		if strings.HasPrefix(p.lines.Text(), prefix) {
			return p.lines.Text()
		}
		skipped = append(skipped, p.lines.Text())
	}
	t.Fatalf("the approver ended before %q: %v\nits stdout:\n%s\nits stderr:\n%s", prefix, p.lines.Err(), strings.Join(skipped, "\n"), p.stderr.String())
	return ""
}

// parkRun is process 1: the user's message, the model's turn with the
// call c1 and the MCP request mcpr_1 awaiting approval, parked.
func parkRun(t *testing.T, s session.Session, api *fakeAPI) {
	t.Helper()
	ctx := context.Background()
	run, err := runstate.Open(ctx, s, approvalOpts)
	require.NoError(t, err)
	require.NoError(t, openaigo.RunInput(ctx, run, openaigo.InputParam(session.MustItem(approvalUser(1)))))
	params, err := openaigo.New(s, openaigo.Options{}).Params(ctx, e2eBase)
	require.NoError(t, err)
	client := newClient(api.URL())
	resp, err := client.Responses.New(ctx, params)
	require.NoError(t, err)
	items, err := openaigo.OutputItems(resp)
	require.NoError(t, err)
	require.NoError(t, openaigo.Interrupt(ctx, run, resp, openaigo.NeedsApproval(items, needsApproval)))
}

// TestTwoApproversAtOnce: 15 tries per backend; the tool runs exactly once
// in every try, and the history is whole.
func TestTwoApproversAtOnce(t *testing.T) {
	const tries = 15
	for _, b := range []string{"sqlite", "redis", "postgres"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn, dir := backendURL(t, b), t.TempDir()
			api := newFakeAPI(t, approvalAPI)
			st, err := adapters.Open(ctx, dsn)
			require.NoError(t, err)
			defer st.Close()
			a, c := startApprover(t, dsn, dir), startApprover(t, dsn, dir)
			outcomes := map[string]int{}
			toolRuns := 0
			for try := range tries {
				sid := fmt.Sprintf("approvers-%d", try)
				s, err := st.Session(sid)
				require.NoError(t, err)
				parkRun(t, s, api)
				// Both go at once: one write each, back to back.
				_, errA := fmt.Fprintf(a.stdin, "GO %s\n", sid)
				_, errC := fmt.Fprintf(c.stdin, "GO %s\n", sid)
				require.NoError(t, errors.Join(errA, errC))
				var got []string
				for _, p := range []*approverProc{a, c} {
					line := p.expect(t, "RESULT "+sid+" ")
					o := strings.TrimPrefix(line, "RESULT "+sid+" ")
					got = append(got, o)
					outcomes[o]++
				}
				// The parent finishes the run; the tool must not run again.
				log := filepath.Join(dir, sid)
				require.NoError(t, approvalLoop(ctx, s, newClient(api.URL()), 1, toolSystem{
					run:   appendTool(log),
					acted: func(id string) (bool, error) { return toolActed(log, id) },
					note:  func(string, string) {},
				}, func(string) {}))
				ran := readLines(t, log)
				toolRuns += len(ran)
				require.Equal(t, []string{"c1"}, ran, "try %d: the tool ran exactly once (approvers: %v)", try, got)
				require.Contains(t, got, "ran", "try %d: one approver ran it", try)
				items, err := session.All(ctx, s)
				require.NoError(t, err)
				want := approvalExpected(1)
				require.Len(t, items, len(want), "try %d", try)
				for i := range want {
					require.Equal(t, canonical(want[i]), canonical(items[i].String()), "try %d item %d", try, i)
				}
				require.Empty(t, history.Diagnose(items), "try %d", try)
				require.Empty(t, runsLeft(t, s), "try %d: no run left", try)
			}
			_, _, rejected := api.stats()
			require.Empty(t, rejected)
			t.Logf("two approvers (two processes) on %s: tries=%d tool-runs=%d approver outcomes %v", b, tries, toolRuns, outcomes)
		})
	}
}
