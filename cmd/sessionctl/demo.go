package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/atomicfile"
	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["demo"] = command{"a scripted agent run on embedded SQLite: a call parked for approval, a crash mid-settle, the recovery", runDemo}
	commands[demoChildCommand] = command{"", runDemoChild}
}

// demoChildCommand is the hidden command the demo runs as its child
// process: the resumed run that is killed mid-settle.
const demoChildCommand = "demo-child"

// demoSession is the id of the demo's conversation.
const demoSession = "demo-conversation"

// committedLine is what the child prints once its append committed.
const committedLine = "append committed"

// demoStep is one step of the demo in its -json output.
type demoStep struct {
	Title string   `json:"title"`
	Lines []string `json:"lines"`
}

// demoReport is demo's -json output.
type demoReport struct {
	Dir        string     `json:"dir"`
	Store      string     `json:"store"`
	Checkpoint string     `json:"checkpoint"`
	Steps      []demoStep `json:"steps"`
	History    []string   `json:"history"` // the final history, each item's stored JSON text
	Healthy    bool       `json:"healthy"`
}

// runDemo tells the held-write story on a real SQLite file in a
// temporary directory, with a real child process killed by SIGKILL.
func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "demo", "")
	asJSON := fs.Bool("json", false, "print the steps as one JSON document")
	keep := fs.String("dir", "", "run in this directory and keep it (default: a temporary directory, removed at the end)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("demo takes no arguments")
	}
	dir := *keep
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sessionctl-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	dsn := "sqlite://" + filepath.Join(dir, "sessions.db")
	cpPath := filepath.Join(dir, "checkpoint.json")
	rep := demoReport{Dir: dir, Store: dsn, Checkpoint: cpPath}
	step := func(title string, lines ...string) {
		rep.Steps = append(rep.Steps, demoStep{title, lines})
		e.setStatus("demo stopped after step %d (%s); its files are in %s", len(rep.Steps), title, dir)
		if *asJSON {
			return
		}
		fmt.Fprintf(e.stdout, "%d. %s\n", len(rep.Steps), title)
		for _, l := range lines {
			fmt.Fprintf(e.stdout, "   %s\n", l)
		}
		fmt.Fprintln(e.stdout)
	}

	st, s, err := openDemo(ctx, dsn)
	if err != nil {
		return err
	}
	defer st.Close()

	// Turn 1: the user's input is persisted; the model answers with a tool
	// call that needs approval, under output guardrails: the call is
	// withheld from the session and parked on the checkpoint.
	if err := session.Append(ctx, s, mustDemoItems(`{"role":"user","content":"Write the quarterly report to report.md"}`)); err != nil {
		return err
	}
	call := session.MustItem(`{"type":"function_call","call_id":"call_1","name":"write_file","arguments":"{\"path\":\"report.md\"}"}`)
	cp := runstate.New()
	cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"call_1"}}
	if !runstate.ShouldDefer(true, "stop_on_first_tool") {
		return errors.New("demo: ShouldDefer says not to withhold; the story needs it")
	}
	resp := "resp_1"
	if err := cp.Park(s, []session.Item{call}, runstate.ParkOptions{ResponseID: &resp}); err != nil {
		return err
	}
	items, err := session.All(ctx, s)
	if err != nil {
		return err
	}
	step("Turn 1: the model calls write_file, which needs approval; output guardrails have not approved the response yet",
		"runstate.ShouldDefer(output guardrails, stop_on_first_tool) = true: the call is withheld from the session",
		"runstate.Park puts it on the checkpoint, not in the store",
		"session now:    "+demoKinds(items),
		"checkpoint now: held ["+demoKinds(cp.Pending.Items)+"]")

	doc, err := cp.MarshalJSON()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(cpPath, doc); err != nil {
		return err
	}
	step("The checkpoint is written to disk (write, fsync, rename) and the process waits for a human",
		fmt.Sprintf("%s: %d bytes, $schemaVersion %s, pending_session_write held", cpPath, len(doc), schemaOf(doc)))

	// Approval: a child process resumes, runs the tool and settles; it is
	// killed right after its append commits.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.CommandContext(ctx, exe, demoChildCommand, dsn, cpPath)
	child.Stderr = e.stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	killed := false
	if strings.TrimSpace(line) == committedLine {
		killed = child.Process.Kill() == nil // SIGKILL: no deferred code, no cleanup
	}
	werr := child.Wait()
	if !killed {
		return fmt.Errorf("demo: the child did not reach its append (%v, %v, %q)", rerr, werr, line)
	}
	doc, err = os.ReadFile(cpPath)
	if err != nil {
		return err
	}
	cp, err = runstate.Load(doc)
	if err != nil {
		return err
	}
	if items, err = session.All(ctx, s); err != nil {
		return err
	}
	record := "none"
	if cp.Pending != nil {
		record = "ordinary pending write [" + demoKinds(cp.Pending.Items) + "], tail digests recorded"
	}
	step(fmt.Sprintf("Approved. A resumed run (child process %d) runs write_file and settles call and output in one append", child.Process.Pid),
		"it loads the checkpoint, runs the tool (ExtendHeld), claims the batch (TakeHeld) and calls SaveResumedTurn,",
		"which registers the batch on the checkpoint; a session wrapper writes the checkpoint to disk just before the append",
		"the demo then kills the child with SIGKILL right after its append COMMITTED and before the record was cleared:",
		"a real process death at the worst moment, placed there on purpose (not a random kill)",
		fmt.Sprintf("child: %v", werr),
		"session now:    "+demoKinds(items),
		"checkpoint now: "+record)

	// Recovery: load the checkpoint and Resume at entry, before any model
	// call or tool.
	before := len(items)
	if _, err := cp.Resume(ctx, s); err != nil {
		return fmt.Errorf("demo: resume: %w", err)
	}
	if doc, err = cp.MarshalJSON(); err != nil {
		return err
	}
	if err := atomicfile.Write(cpPath, doc); err != nil {
		return err
	}
	if items, err = session.All(ctx, s); err != nil {
		return err
	}
	verdict := "the tail already holds the batch: the lost acknowledgement is accepted, nothing is appended again"
	if len(items) != before {
		verdict = fmt.Sprintf("the batch was missing: Resume appended it (%d items)", len(items)-before)
	}
	step("Recovery: this process, standing in for the restarted agent, loads the checkpoint and calls Resume first",
		"(before any model call or tool) Resume reads the session tail and compares it with the record's digests",
		verdict,
		fmt.Sprintf("checkpoint now: pending write %v", cp.Pending != nil))

	problems := history.Diagnose(items)
	rep.Healthy = len(problems) == 0
	lines := make([]string, 0, len(items)+1)
	for i, it := range items {
		lines = append(lines, fmt.Sprintf("%d  %s", i, sanitize(it.String())))
		rep.History = append(rep.History, string(it.Bytes()))
	}
	verdict = "every call before its output, each item once: history.Diagnose finds no problem"
	if !rep.Healthy {
		verdict = fmt.Sprintf("history.Diagnose finds %d problems", len(problems))
	}
	step("The final history in "+dsn, append(lines, verdict)...)
	if *asJSON {
		if err := writeJSON(e, rep); err != nil {
			return err
		}
	} else if *keep != "" {
		fmt.Fprintf(e.stdout, "kept: %s (try: sessionctl inspect %s %s)\n", dir, dsn, demoSession)
	}
	if !rep.Healthy {
		return errFailed
	}
	return nil
}

// openDemo opens the store at dsn and the demo's session in it; the
// caller closes the store.
func openDemo(ctx context.Context, dsn string) (adapters.Store, session.Session, error) {
	st, err := adapters.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	s, err := st.Session(demoSession)
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return st, s, nil
}

// runDemoChild is the resumed run: it settles the held batch and, once
// its append committed, says so and waits to be killed.
func runDemoChild(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet(demoChildCommand, flag.ContinueOnError)
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		return usagef("internal: %s URL CHECKPOINT", demoChildCommand)
	}
	dsn, cpPath := fs.Arg(0), fs.Arg(1)
	st, s, err := openDemo(ctx, dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	doc, err := os.ReadFile(cpPath)
	if err != nil {
		return err
	}
	cp, err := runstate.Load(doc)
	if err != nil {
		return err
	}
	if _, err := cp.Resume(ctx, s); err != nil { // an interruption resume: the batch rides
		return err
	}
	// The approved tool runs; its output joins the held batch.
	output := mustDemoItems(`{"type":"function_call_output","call_id":"call_1","output":"wrote report.md (2 KiB)"}`)
	if err := cp.ExtendHeld(output); err != nil {
		return err
	}
	cp.SetStep(runstate.StepRunAgain)
	announced := capwrap.Compose(announceCommit{Session: s, out: e.stdout}, capwrap.Of(s))
	ds := cp.WrapSaveBeforeAppend(announced, func(doc []byte) error { return atomicfile.Write(cpPath, doc) })
	_, err = cp.SaveResumedTurn(ctx, ds, runstate.ResumedTurn{
		// The resolved turn: the tool's output and the model's answer.
		Items:      append(output, mustDemoItems(`{"type":"message","role":"assistant","content":"The report is in report.md."}`)...),
		Held:       cp.TakeHeld(),
		ResponseID: "resp_2",
	})
	return err
}

// announceCommit announces each committed append and then blocks until the
// demo kills the process.
type announceCommit struct {
	session.Session
	out interface{ Write([]byte) (int, error) }
}

func (a announceCommit) AddItems(ctx context.Context, items []session.Item) error {
	if err := a.Session.AddItems(ctx, items); err != nil {
		return err
	}
	fmt.Fprintln(a.out, committedLine)
	select { // the demo kills us here
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return errors.New("demo child: not killed within a minute")
	}
}
func (a announceCommit) AcceptsRunContext() bool    { return capwrap.AcceptsRunContext(a.Session) }
func (a announceCommit) IgnoreIDsForMatching() bool { return capwrap.IgnoresIDs(a.Session) }

func schemaOf(doc []byte) string {
	var v struct {
		Schema string `json:"$schemaVersion"`
	}
	_ = json.Unmarshal(doc, &v)
	return v.Schema
}

// demoKinds names each item by its role, or its type and call id.
func demoKinds(items []session.Item) string {
	if len(items) == 0 {
		return "(empty)"
	}
	out := make([]string, len(items))
	for i, it := range items {
		switch {
		case it.Type() == "message" || it.Type() == "" && it.Role() != "":
			out[i] = it.Role()
		default:
			out[i] = it.Type() + ":" + it.CallID()
		}
	}
	return sanitize(strings.Join(out, " "))
}

func mustDemoItems(ss ...string) []session.Item {
	its, err := session.ParseItems(ss...)
	if err != nil {
		panic(err)
	}
	return its
}
