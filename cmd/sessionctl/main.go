// Command sessionctl checks, inspects, repairs and migrates agent session
// stores.
//
//	sessionctl list    [flags] URL     list sessions with item counts, sizes and checkpoints
//	sessionctl inspect [flags] URL ID  print a session's history, its health and its checkpoints
//	sessionctl doctor  [flags] URL     diagnose every session: orphan outputs, corrupt records, pending writes
//	sessionctl repair  [flags] URL ID  move orphan outputs and unreadable records to a quarantine session
//	sessionctl migrate [flags] --from URL --to URL [--session ID…]
//	sessionctl check   [flags] [URL]   run the conformance suite against a store
//	sessionctl bench   [flags] [URL]   measure append and latest-N on a store
//	sessionctl demo                    a scripted agent run: park, crash mid-settle, recover
//
// Store URLs are those of package adapters: memory://, sqlite:///path.db,
// redis://host:port/0, redis+cluster://h1:p1,h2:p2, mongodb://host:port/db.
// With no URL, check and bench use an SQLite file in a temporary directory.
//
// list, inspect, doctor and migrate's source open the store read-only
// (adapters.Options.ReadOnly): they never create a file, table, collection
// or index, and a store that does not exist is an error. No other command
// creates an SQLite store at a path that does not exist either, except
// migrate's destination (and demo's). repair changes nothing unless given
// -apply, and then replaces a history only if it is unchanged since it
// was read (session.ReplaceIf), so that an agent appending beside it loses
// nothing; a store without that capability needs -offline. repair -apply
// and migrate --to refuse memory://, whose writes vanish with the process.
//
// Encrypted stores (package encrypted) are read and written through their
// keys, from -keys-file or $SESSIONCTL_KEYS, never a flag and never
// printed; without them encrypted items are reported as not diagnosed.
//
// Every command takes -json and then prints one JSON document on standard
// output; docs/sessionctl.md lists its fields.
//
// Interrupt (SIGINT, SIGTERM): a command stops within 2 s and prints one
// line saying how far it got, and exits with status 130.
//
// Exit status: 0 on success, 1 when a check, diagnosis or command fails,
// 2 on a usage error, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// command is one sessionctl subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

var commands = map[string]command{}

// env is what a command writes to.
type env struct {
	stdout, stderr io.Writer
	isTerminal     bool

	mu     sync.Mutex
	status string // how far the command got, for the interrupt summary
}

// setStatus records how far the command got, in a few words ("3 of 10
// sessions diagnosed; nothing changed"): the line an interrupt prints.
func (e *env) setStatus(format string, args ...any) {
	e.mu.Lock()
	e.status = fmt.Sprintf(format, args...)
	e.mu.Unlock()
}

func (e *env) statusLine() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.status == "" {
		return "stopped before it finished"
	}
	return e.status
}

// interruptGrace is how long a command may take to return once
// interrupted before run gives up on it and reports where it was.
const interruptGrace = 1500 * time.Millisecond

// exitInterrupted is the exit status after SIGINT or SIGTERM (128+2).
const exitInterrupted = 130

// errUsage marks an error as a usage error (exit status 2).
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usagef(format string, args ...any) error { return errUsage{fmt.Sprintf(format, args...)} }

// errFailed is returned when a command ran but what it checked failed
// (exit status 1 without an extra message).
var errFailed = errors.New("failed")

func main() {
	quietDriverLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second interrupt kills at once
	}()
	os.Exit(run(ctx, &env{stdout: os.Stdout, stderr: os.Stderr, isTerminal: isTerminal(os.Stderr)}, os.Args[1:]))
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "sessionctl: unknown command %q\n\n", args[0])
		usage(e.stderr)
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- cmd.run(ctx, e, args[1:]) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done:
		case <-time.After(interruptGrace):
			// The command did not return (a driver deaf to its context):
			// say where it was and let main exit.
			fmt.Fprintf(e.stderr, "sessionctl %s: interrupted: %s\n", args[0], oneLine(e.statusLine()))
			return exitInterrupted
		}
	}
	var u errUsage
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(e.stderr, "sessionctl %s: interrupted: %s\n", args[0], oneLine(e.statusLine()))
		return exitInterrupted
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		fmt.Fprintf(e.stderr, "sessionctl %s: %s\n", args[0], u.msg)
		return 2
	case errors.Is(err, errFailed):
		return 1
	default:
		fmt.Fprintf(e.stderr, "sessionctl %s: %s\n", args[0], oneLine(err.Error()))
		return 1
	}
}

// oneLine folds a message onto one line and escapes what a terminal would
// interpret, so that an error quoting stored data cannot drive the
// terminal.
func oneLine(s string) string {
	return sanitize(strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " "))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sessionctl <command> [flags] [args]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if c.summary == "" {
			continue // internal (the demo's child process)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Store URLs: memory://, sqlite:///path/file.db, redis://host:port/0, rediss://…,")
	fmt.Fprintln(w, "redis+cluster://h1:p1,h2:p2, mongodb://host:port/db. Run 'sessionctl <command> -h' for flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: sessionctl %s [flags] %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags, also accepting flags after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
