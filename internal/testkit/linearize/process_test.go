package linearize

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

// The child process's environment.
const (
	envChildDSN     = "LINEARIZE_CHILD_DSN"
	envChildFirst   = "LINEARIZE_CHILD_FIRST_CLIENT"
	envChildClients = "LINEARIZE_CHILD_CLIENTS"
)

// TestChildProcess is one of the processes of a multi-process campaign:
// it opens the store, says READY, and for each line "RUN <id> <ops>
// <seed> <pace>" on stdin records a history on session id with its
// clients and writes it as one line "OPS <json>".
func TestChildProcess(t *testing.T) {
	dsn := os.Getenv(envChildDSN)
	if dsn == "" {
		t.Skip("only run as a process of the multi-process campaign")
	}
	first, _ := strconv.Atoi(os.Getenv(envChildFirst))
	clients, _ := strconv.Atoi(os.Getenv(envChildClients))
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "READY")
	if err := out.Flush(); err != nil {
		t.Fatal(err)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var id string
		var ops int
		var seed uint64
		var pace float64
		if _, err := fmt.Sscanf(in.Text(), "RUN %s %d %d %g", &id, &ops, &seed, &pace); err != nil {
			t.Fatalf("bad command %q: %v", in.Text(), err)
		}
		s, err := st.Session(id)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Clients: clients, FirstClient: first, Ops: ops, Seed: seed, Pace: pace}
		for range clients {
			h, err := st.Session(id)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Handles = append(cfg.Handles, h)
		}
		h := Record(ctx, s, cfg)
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(out, "OPS %s\n", b)
		if err := out.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// child is a running TestChildProcess.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// line returns the child's next line that starts with prefix, skipping
// others (the test framework's).
func (c *child) line(prefix string) (string, error) {
	for c.out.Scan() {
		if rest, ok := strings.CutPrefix(c.out.Text(), prefix); ok {
			return rest, nil
		}
	}
	if err := c.out.Err(); err != nil {
		return "", err
	}
	return "", io.ErrUnexpectedEOF
}

// processes starts procs copies of the test binary as TestChildProcess on
// dsn, splitting clients among them, and returns a recordFunc that has all
// of them record each history at once (each starts when told to, so they
// overlap) and merges what they recorded. Their times are comparable:
// Now reads the system-wide monotonic clock.
func processes(t *testing.T, dsn string, procs, clients int) recordFunc {
	t.Helper()
	children := make([]*child, procs)
	first := 0
	for p := range procs {
		n := clients / procs
		if p < clients%procs {
			n++
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChildDSN+"="+dsn, envChildFirst+"="+strconv.Itoa(first), envChildClients+"="+strconv.Itoa(n))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		c := &child{cmd: cmd, stdin: stdin, out: sc}
		children[p] = c
		t.Cleanup(func() {
			_ = c.stdin.Close()
			done := make(chan error, 1)
			go func() { done <- c.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("child process: %v", err)
				}
			case <-time.After(30 * time.Second):
				_ = c.cmd.Process.Kill()
				t.Errorf("child process did not exit")
			}
		})
		first += n
	}
	for _, c := range children {
		if _, err := c.line("READY"); err != nil {
			t.Fatalf("child process did not start: %v", err)
		}
	}
	st, err := adapters.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return func(t *testing.T, id string, cfg Config) (History, int, session.Capabilities) {
		probe, err := st.Session(id)
		if err != nil {
			t.Fatal(err)
		}
		for p, c := range children {
			if _, err := fmt.Fprintf(c.stdin, "RUN %s %d %d %g\n", id, cfg.Ops, cfg.Seed+uint64(p), cfg.Pace); err != nil {
				t.Fatalf("child process: %v", err)
			}
		}
		var all History
		for _, c := range children {
			line, err := c.line("OPS ")
			if err != nil {
				t.Fatalf("child process: %v", err)
			}
			var h History
			if err := json.Unmarshal([]byte(line), &h); err != nil {
				t.Fatalf("child process's history: %v", err)
			}
			all = append(all, h...)
		}
		return all, 0, session.Probe(probe)
	}
}
