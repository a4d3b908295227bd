// Command sessionctl checks, inspects, repairs and migrates agent session
// stores.
//
//	sessionctl check   [flags] [URL]   run the conformance suite against a store
//	sessionctl inspect [flags] URL ID  print a session's history and its health
//	sessionctl doctor  [flags] URL     diagnose sessions: orphan outputs, corrupt records
//	sessionctl repair  [flags] URL ID  drop orphan calls and outputs, atomically
//	sessionctl migrate [flags] --from URL --to URL [--session ID…]
//	sessionctl bench   [flags] [URL]   measure append and latest-N on a store
//
// Store URLs are those of package adapters: memory://, sqlite:///path.db,
// redis://host:port/0, redis+cluster://h1:p1,h2:p2, mongodb://host:port/db.
// With no URL, check and bench use an SQLite file in a temporary directory.
//
// Exit status: 0 on success, 1 when a check, diagnosis or command fails,
// 2 on a usage error.
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
	"syscall"
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
}

// errUsage marks an error as a usage error (exit status 2).
type errUsage struct{ msg string }

func (e errUsage) Error() string { return e.msg }

func usagef(format string, args ...any) error { return errUsage{fmt.Sprintf(format, args...)} }

// errFailed is returned when a command ran but what it checked failed
// (exit status 1 without an extra message).
var errFailed = errors.New("failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	err := cmd.run(ctx, e, args[1:])
	var u errUsage
	switch {
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
		fmt.Fprintf(e.stderr, "sessionctl %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sessionctl <command> [flags] [args]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
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
