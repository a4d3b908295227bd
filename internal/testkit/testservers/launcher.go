package testservers

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// launcherBuildTimeout bounds "go build" of the launcher. The first build
// compiles FerretDB, SQLite in Go and testcontainers: about two and a half
// minutes on two cores with the standard library already in the build
// cache, four and a half with an empty build cache. It stays under go
// test's default 10-minute timeout so that a slow build is reported, not a
// panic.
const launcherBuildTimeout = 8 * time.Minute

var launcherBin lazy[string]

// launcherBinary returns the path of the launcher binary, building it once
// per source version into a cache shared by all test processes:
// os.TempDir()/agentsessions-launcher/HASH/launcher, where HASH covers the
// launcher module's go.mod, go.sum and non-test .go files and the Go version.
func launcherBinary() (string, error) {
	return launcherBin.get(func() (string, string, error) {
		bin, err := buildLauncher()
		return bin, "", err
	})
}

// launcherDir returns the directory of the launcher module, found next to
// this source file.
func launcherDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("cannot locate the launcher sources (source path %q; built with -trimpath?)", file)
	}
	dir := filepath.Join(filepath.Dir(file), "launcher")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("launcher module not found: %w", err)
	}
	return dir, nil
}

// launcherHash hashes what the launcher binary is built from.
func launcherHash(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if name == "go.mod" || name == "go.sum" || (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// buildLauncher builds the launcher unless the cache already has it. The
// build writes a temporary name and renames it into place, under a file
// lock, so concurrent test processes neither collide nor build twice.
func buildLauncher() (string, error) {
	src, err := launcherDir()
	if err != nil {
		return "", err
	}
	hash, err := launcherHash(src)
	if err != nil {
		return "", fmt.Errorf("hash launcher sources: %w", err)
	}
	cacheDir := filepath.Join(os.TempDir(), "agentsessions-launcher", hash)
	bin := filepath.Join(cacheDir, "launcher")
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cacheDir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("lock launcher build: %w", err)
	}
	defer unlock()
	if isExecutable(bin) { // another process built it while we waited
		return bin, nil
	}

	goCmd, err := goCommand()
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(cacheDir, "launcher.tmp-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), launcherBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "build", "-C", src, "-buildvcs=false", "-o", tmp, ".")
	// The launcher is its own module: keep any go.work of the repository out.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timed out after %v)", err, launcherBuildTimeout)
		}
		return "", fmt.Errorf("build launcher (go build -C %s): %v\n%s", src, err, tail(string(out), 2000))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	if testingVerbose() {
		fmt.Fprintf(os.Stderr, "testservers: built launcher in %v: %s\n", time.Since(start).Round(time.Second), bin)
	}
	return bin, nil
}

// goCommand finds the go command: the one on PATH (go test puts its own
// GOROOT/bin first), else $GOROOT/bin/go.
func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", errors.New("the go command is not in PATH; it is needed to build the launcher")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// tail returns about the last max bytes of s.
func tail(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return s
}

// testingVerbose reports whether the test binary runs with -test.v.
func testingVerbose() bool {
	for _, a := range os.Args[1:] {
		if a == "-test.v" || a == "-test.v=true" || a == "-test.v=test2json" {
			return true
		}
	}
	return false
}

// runLauncher runs "launcher ARGS...", waits up to readyTimeout for its
// "READY <url>" line, returns that URL and registers it to be stopped by stopAll: its stdin is
// closed, which asks it to stop, and it is killed if it has not exited
// after stopGrace. deathSig is sent to it if the test process dies.
func runLauncher(name string, readyTimeout, stopGrace time.Duration, deathSig syscall.Signal, args ...string) (string, error) {
	dir, err := subDir("launcher")
	if err != nil {
		return "", err
	}
	p, url, err := startLauncher(name, dir, readyTimeout, deathSig, args...)
	if err != nil {
		return "", err
	}
	if !onStop(func() { p.stop(stopGrace) }) {
		p.stop(stopGrace)
		return "", errors.New("servers already stopped")
	}
	return url, nil
}

// startLauncher runs "launcher ARGS..." in dir, its stderr appended to
// dir/launcher.log, waits up to readyTimeout for its "READY <url>" line and
// returns the process and that URL. The process's askStop closes its stdin,
// which asks it to stop; the pipe is also released when the launcher exits
// (killed, say). deathSig is sent to it if the test process dies. The caller
// stops it.
func startLauncher(name, dir string, readyTimeout time.Duration, deathSig syscall.Signal, args ...string) (*process, string, error) {
	bin, err := launcherBinary()
	if err != nil {
		return nil, "", err
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdin = stdinR
	cmd.Stdout = stdoutW
	p, err := startCmd(name, filepath.Join(dir, "launcher.log"), cmd, deathSig)
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, "", err
	}
	closeStdin := sync.OnceFunc(func() { stdinW.Close() })
	p.askStop = closeStdin

	readyc := make(chan string, 1)
	go func() {
		defer stdoutR.Close()
		// Its stdout ends when the launcher exits: its stdin is of no
		// more use.
		defer closeStdin()
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				readyc <- strings.TrimSpace(url)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdoutR) // never block the launcher's writes
	}()

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case url := <-readyc:
		return p, url, nil
	case <-p.done:
		closeStdin()
		return nil, "", p.failure(errors.New("exited before it was ready"))
	case <-timer.C:
		p.kill()
		closeStdin()
		return nil, "", p.failure(fmt.Errorf("not ready within %v", readyTimeout))
	}
}

// Time allowed for the container path: pulling an image can take minutes.
const (
	containerReadyTimeout = 6 * time.Minute
	containerStopGrace    = 60 * time.Second
)

// startContainer runs "launcher container kind" and returns its URL. The
// launcher terminates the container when it stops; if the test process dies
// it gets SIGTERM (and its stdin closes), so it still does.
func startContainer(kind string) (string, error) {
	return runLauncher("launcher container "+kind, containerReadyTimeout, containerStopGrace, syscall.SIGTERM, "container", kind)
}
