// Command launcher starts the heavy test servers of
// github.com/agentsessions/sessions/internal/testkit/testservers: FerretDB embedded
// as a Go package, and testcontainers-go containers. It lives in its own
// module so that FerretDB, testcontainers and their dependencies stay out of
// the library's go.mod.
//
// Usage:
//
//	launcher ferretdb -listen 127.0.0.1:PORT -dir DIR
//	launcher ferretdb -listen 127.0.0.1:PORT -postgresql-url URL
//	launcher container redis|mongo|postgres
//	launcher docker-ping
//
// The server subcommands print one line "READY <url>" on stdout once the
// server accepts connections, then run until standard input is closed (unless
// -stdin=false) or the process gets SIGTERM or SIGINT. docker-ping exits 0 if
// and only if a Docker engine answers.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "ferretdb":
		err = runFerretDB(args)
	case "container":
		err = runContainer(args)
	case "docker-ping":
		err = runDockerPing(args)
	case "-h", "-help", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "launcher: unknown subcommand %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "launcher %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  launcher ferretdb -listen 127.0.0.1:PORT (-dir DIR | -postgresql-url URL) [-stdin=true] [-tls-listen ADDR -tls-cert F -tls-key F -tls-ca F]
  launcher container redis|mongo|postgres [-stdin=true]
  launcher docker-ping [-timeout 3s]
`)
}

// untilDone returns a context that is canceled when SIGTERM or SIGINT
// arrives or, when watchStdin is set, when standard input reaches EOF.
func untilDone(watchStdin bool) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	if watchStdin {
		ctx2, cancel := context.WithCancel(ctx)
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
		return ctx2, func() { cancel(); stop() }
	}
	return ctx, stop
}

// ready announces the server's URL to the parent process.
func ready(url string) {
	fmt.Fprintf(os.Stdout, "READY %s\n", url)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("launcher "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}
