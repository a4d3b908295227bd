package testservers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables read by [Daprd].
const (
	// EnvDaprdBin names a daprd binary to run instead of building one, for
	// a CI step that built it beforehand (see the daprd module's README).
	EnvDaprdBin = "SESSIONS_DAPRD_BIN"
	// EnvDaprdCache names the directory that holds built daprd binaries;
	// empty means os.UserCacheDir()/agentsessions-daprd.
	EnvDaprdCache = "SESSIONS_DAPRD_CACHE"
)

// DaprStateStore is the name of the state store component [Daprd] loads.
const DaprStateStore = "statestore"

// KindLocalDaprd is the kind [DaprdKind] reports: a daprd built from the
// module proxy and run here, on the Redis of [Redis].
const KindLocalDaprd = "local-daprd"

// daprdMainPkg is the package, in the nested module ./daprd, that "go build"
// turns into daprd: dapr v1.14.0's cmd/daprd registering only the
// components the tests load (see the module's README).
const daprdMainPkg = "./cmd/daprd"

// daprdBuildFlag compiles daprd without optimization or inlining, which
// cuts the CPU of a build with an empty build cache by about a third (see
// the module's README); the sidecar runs the same code, only slower per
// request, which the tests do not measure.
const daprdBuildFlag = "-gcflags=all=-N -l"

// daprdBuildTimeout bounds "go build" of daprd: about 2.5 min of CPU with
// an empty build cache (see the module's README), far longer in wall time
// under load. A CI step builds it first (SESSIONS_DAPRD_BIN) so that no
// test waits for it.
const daprdBuildTimeout = 15 * time.Minute

// Time allowed for daprd to answer /v1.0/healthz (its components loaded),
// and for it to exit after SIGTERM before it is killed.
const (
	daprdReadyTimeout = 60 * time.Second
	daprdStopGrace    = 10 * time.Second
)

// Dapr describes a running daprd sidecar with a Redis state store.
type Dapr struct {
	// GRPCAddr is the sidecar's gRPC API address, 127.0.0.1:PORT.
	GRPCAddr string
	// HTTPAddr is the sidecar's HTTP API address, 127.0.0.1:PORT.
	HTTPAddr string
	// AppID is the sidecar's app id, which prefixes every state key in
	// the store: "<app id>||<key>".
	AppID string
	// StoreName is the state store component's name, DaprStateStore.
	StoreName string
	// RedisURL is the URL of the Redis that holds the state, as [Redis]
	// returns it.
	RedisURL string
}

var sharedDaprd lazy[Dapr]

// Daprd returns a daprd sidecar shared by the test process: no app, no
// placement or scheduler, one state store (DaprStateStore, type
// state.redis) on the Redis [Redis] returns, and an app id of its own
// (agentsessions-PID), so test processes sharing a Redis do not share
// keys. The binary is SESSIONS_DAPRD_BIN when set, else the daprd of the
// nested module ./daprd (github.com/dapr/dapr v1.14.0's cmd/daprd with the
// Redis state store only) built once into a cache keyed by its go.mod,
// go.sum, main package and the Go version (see [DaprdBinary]). When daprd
// cannot be had, the test is skipped, or fails when
// SESSIONS_REQUIRE_BACKENDS=1.
func Daprd(tb testing.TB) Dapr {
	tb.Helper()
	redisURL := Redis(tb)
	d, err := sharedDaprd.get(func() (Dapr, string, error) {
		d, err := startDaprd(redisURL)
		return d, KindLocalDaprd, err
	})
	if err != nil {
		unavailable(tb, "daprd", err)
	}
	return d
}

// DaprdKind reports which kind of sidecar [Daprd] returned: "local-daprd",
// or "" before Daprd was first called or when it failed.
func DaprdKind() string { return sharedDaprd.Kind() }

var daprdBin lazy[string]

// DaprdBinary returns the path of a daprd binary: SESSIONS_DAPRD_BIN when
// set, else the one built from the nested module ./daprd (its ./cmd/daprd:
// github.com/dapr/dapr v1.14.0's cmd/daprd with the Redis state store only)
// into SESSIONS_DAPRD_CACHE or os.UserCacheDir()/agentsessions-daprd, in a
// directory named by a hash of the module's go.mod, go.sum and main
// package sources, the build flag and the Go version, building it there
// first (with -gcflags=all=-N -l) if it is missing, under a file lock so
// that concurrent test processes build it once.
func DaprdBinary() (string, error) {
	return daprdBin.get(func() (string, string, error) {
		if bin := os.Getenv(EnvDaprdBin); bin != "" {
			if !isExecutable(bin) {
				return "", "", fmt.Errorf("%s=%s is not an executable file", EnvDaprdBin, bin)
			}
			return bin, KindEnv, nil
		}
		bin, err := buildDaprd()
		return bin, "", err
	})
}

// daprdModuleDir returns the directory of the nested module that pins
// daprd's version, found next to this source file.
func daprdModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("cannot locate the daprd module (source path %q; built with -trimpath?)", file)
	}
	dir := filepath.Join(filepath.Dir(file), "daprd")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("daprd module not found: %w", err)
	}
	return dir, nil
}

// daprdCachePath returns where the daprd built from dir is cached: a
// change to the module's go.mod or go.sum, to a file of its main package,
// to the build flag or to the Go toolchain names another directory.
func daprdCachePath(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s pkg=%s flags=%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, daprdMainPkg, daprdBuildFlag)
	names := []string{"go.mod", "go.sum"}
	entries, err := os.ReadDir(filepath.Join(dir, daprdMainPkg))
	if err != nil {
		return "", fmt.Errorf("daprd main package: %w", err)
	}
	for _, e := range entries { // sorted by name
		if e.Type().IsRegular() {
			names = append(names, filepath.Join(daprdMainPkg, e.Name()))
		}
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(name), len(data))
		h.Write(data)
	}
	root := os.Getenv(EnvDaprdCache)
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for daprd (set %s): %w", EnvDaprdCache, err)
		}
		root = filepath.Join(cache, "agentsessions-daprd")
	}
	return filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:20], "daprd"), nil
}

// buildDaprd builds daprd unless the cache already has it, writing a
// temporary name and renaming it into place under a file lock.
func buildDaprd() (string, error) {
	src, err := daprdModuleDir()
	if err != nil {
		return "", err
	}
	bin, err := daprdCachePath(src)
	if err != nil {
		return "", err
	}
	if isExecutable(bin) {
		return bin, nil
	}
	cacheDir := filepath.Dir(bin)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(cacheDir, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("lock daprd build: %w", err)
	}
	defer unlock()
	if isExecutable(bin) {
		return bin, nil
	}
	goCmd, err := goCommand()
	if err != nil {
		return "", err
	}
	tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), daprdBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "build", "-C", src, daprdBuildFlag, "-o", tmp, daprdMainPkg)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	start := time.Now()
	fmt.Fprintf(os.Stderr, "testservers: building daprd (a few minutes the first time): %s\n", bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timed out after %v)", err, daprdBuildTimeout)
		}
		return "", fmt.Errorf("build daprd (go build -C %s %q %s): %v\n%s", src, daprdBuildFlag, daprdMainPkg, err, tail(string(out), 2000))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "testservers: built daprd in %v\n", time.Since(start).Round(time.Second))
	return bin, nil
}

// daprdComponent is the state store component daprd loads.
const daprdComponent = `apiVersion: dapr.io/v1alpha1
kind: Component
metadata:
  name: %s
spec:
  type: state.redis
  version: v1
  metadata:
  - name: redisHost
    value: %q
  - name: redisDB
    value: %q
  - name: redisPassword
    value: %q
`

// NewDaprd starts a private daprd, stopped at the test's cleanup, whose
// state store uses the Redis at redisURL (redis://HOST:PORT/DB), such as a
// fault proxy in front of the server [Redis] returns. Its app id is
// agentsessions-PID-private-N. When daprd cannot be had, the test is
// skipped, or fails when SESSIONS_REQUIRE_BACKENDS=1.
func NewDaprd(tb testing.TB, redisURL string) Dapr {
	tb.Helper()
	privateDaprds.mu.Lock()
	privateDaprds.n++
	appID := "agentsessions-" + strconv.Itoa(os.Getpid()) + "-private-" + strconv.Itoa(privateDaprds.n)
	privateDaprds.mu.Unlock()
	d, p, err := launchDaprd(redisURL, appID)
	if err != nil {
		unavailable(tb, "a private daprd", err)
	}
	tb.Cleanup(func() { p.stop(daprdStopGrace) })
	return d
}

var privateDaprds struct {
	mu sync.Mutex
	n  int
}

// startDaprd starts the shared daprd on the Redis at redisURL and
// registers it to be stopped by stopAll.
func startDaprd(redisURL string) (Dapr, error) {
	d, p, err := launchDaprd(redisURL, "agentsessions-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		return Dapr{}, err
	}
	if !onStop(func() { p.stop(daprdStopGrace) }) {
		p.stop(daprdStopGrace)
		return Dapr{}, errors.New("servers already stopped")
	}
	return d, nil
}

// launchDaprd starts a daprd with app id appID on the Redis at redisURL.
func launchDaprd(redisURL, appID string) (Dapr, *process, error) {
	bin, err := DaprdBinary()
	if err != nil {
		return Dapr{}, nil, err
	}
	u, err := url.Parse(redisURL)
	if err != nil || u.Host == "" {
		return Dapr{}, nil, fmt.Errorf("the Redis URL is not one daprd can use: %v", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = "0"
	}
	password, _ := u.User.Password()
	dir, err := subDir("daprd")
	if err != nil {
		return Dapr{}, nil, err
	}
	resources := filepath.Join(dir, "resources")
	if err := os.Mkdir(resources, 0o755); err != nil {
		return Dapr{}, nil, err
	}
	component := fmt.Sprintf(daprdComponent, DaprStateStore, u.Host, db, password)
	if err := os.WriteFile(filepath.Join(resources, "statestore.yaml"), []byte(component), 0o600); err != nil {
		return Dapr{}, nil, err
	}
	var lastErr error
	for range startRetries {
		d, p, err := startDaprdOnce(bin, dir, resources, appID)
		if err == nil {
			d.RedisURL = redisURL
			return d, p, nil
		}
		lastErr = err
	}
	return Dapr{}, nil, lastErr
}

// startDaprdOnce starts daprd on four free ports and waits until it is
// healthy; a port taken in between makes it exit, and the caller retries.
func startDaprdOnce(bin, dir, resources, appID string) (Dapr, *process, error) {
	var ports [5]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return Dapr{}, nil, err
		}
		ports[i] = p
	}
	d := Dapr{
		GRPCAddr:  "127.0.0.1:" + strconv.Itoa(ports[0]),
		HTTPAddr:  "127.0.0.1:" + strconv.Itoa(ports[1]),
		AppID:     appID,
		StoreName: DaprStateStore,
	}
	p, err := startProcess("daprd", dir, filepath.Join(dir, "daprd.log"), bin,
		"--mode", "standalone",
		"--app-id", appID,
		"--dapr-grpc-port", strconv.Itoa(ports[0]),
		"--dapr-http-port", strconv.Itoa(ports[1]),
		"--dapr-internal-grpc-port", strconv.Itoa(ports[2]),
		"--metrics-port", strconv.Itoa(ports[3]),
		"--profile-port", strconv.Itoa(ports[4]),
		"--enable-metrics=false",
		"--dapr-listen-addresses", "127.0.0.1",
		"--resources-path", resources,
		"--log-level", "warn",
	)
	if err != nil {
		return Dapr{}, nil, err
	}
	if err := waitDaprdHealthy(p, d.HTTPAddr); err != nil {
		p.kill()
		return Dapr{}, nil, p.failure(err)
	}
	return d, p, nil
}

// waitDaprdHealthy polls daprd's /v1.0/healthz, which answers 204 once
// its components are loaded.
func waitDaprdHealthy(p *process, httpAddr string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(daprdReadyTimeout)
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("daprd exited before it was healthy: %v", err)
		}
		resp, err := client.Get("http://" + httpAddr + "/v1.0/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
			err = fmt.Errorf("healthz answered %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daprd not healthy after %v: %v", daprdReadyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
