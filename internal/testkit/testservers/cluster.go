package testservers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clusterMasters is the number of master nodes of the local cluster.
const clusterMasters = 3

// Time allowed for redis-cli --cluster create, and for every node to report
// cluster_state:ok afterwards.
const (
	clusterCreateTimeout = 60 * time.Second
	clusterOKTimeout     = 60 * time.Second
)

var sharedCluster lazy[[]string]

// RedisCluster returns the addresses ("127.0.0.1:PORT") of a 3-master Redis
// Cluster shared by the test process: SESSIONS_REDIS_CLUSTER_ADDRS
// (comma-separated) when set; else three local redis-server nodes with
// cluster mode enabled, joined with redis-cli --cluster create, once every
// node reports cluster_state:ok with all 16384 slots covered. When no
// cluster can be had, the test is skipped, or fails when
// SESSIONS_REQUIRE_BACKENDS=1.
func RedisCluster(tb testing.TB) []string {
	tb.Helper()
	addrs, err := sharedCluster.get(startSharedCluster)
	if err != nil {
		unavailable(tb, "a 3-master Redis Cluster", err)
	}
	return append([]string(nil), addrs...)
}

// RedisClusterKind reports which kind of cluster [RedisCluster] returned:
// "env" or "local-redis-server"; "" before RedisCluster was first called or
// when it failed.
func RedisClusterKind() string { return sharedCluster.Kind() }

func startSharedCluster() ([]string, string, error) {
	if env := os.Getenv(EnvRedisClusterAddrs); env != "" {
		var addrs []string
		for _, a := range strings.Split(env, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			return nil, "", fmt.Errorf("%s=%q names no address", EnvRedisClusterAddrs, env)
		}
		return addrs, KindEnv, nil
	}
	var tried attempts
	for range startRetries {
		addrs, err := startLocalCluster()
		if err == nil {
			return addrs, KindLocalRedisServer, nil
		}
		if errors.Is(err, errNoRedisServer) || errors.Is(err, errNoRedisCLI) {
			tried.add("local redis-server cluster", err)
			break
		}
		tried.add("local redis-server cluster", err)
	}
	return nil, "", tried
}

// errNoRedisCLI means the redis-cli binary is not installed.
var errNoRedisCLI = errors.New("redis-cli not found in PATH (install the Debian package redis-tools)")

// startLocalCluster starts the nodes on fresh ports, creates the cluster and
// waits until it is ready. On failure it stops whatever it started.
func startLocalCluster() (addrs []string, err error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errNoRedisServer
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errNoRedisCLI
	}
	ports, err := freeClusterPorts(clusterMasters)
	if err != nil {
		return nil, err
	}
	dir, err := subDir("redis-cluster")
	if err != nil {
		return nil, err
	}

	var procs []*process
	stop := func() {
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() { p.stop(redisStopGrace) })
		}
		wg.Wait()
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	for _, port := range ports {
		nodeDir := filepath.Join(dir, strconv.Itoa(port))
		if err := os.Mkdir(nodeDir, 0o755); err != nil {
			return nil, err
		}
		p, err := startLocalRedis(nodeDir, port,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
			"--save", "", "--appendonly", "no",
		)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(port))
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create %s: %v\n%s", strings.Join(addrs, " "), err, strings.TrimSpace(string(out)))
	}
	if err := waitClusterOK(addrs, clusterOKTimeout); err != nil {
		return nil, err
	}
	if !onStop(stop) {
		return nil, errors.New("servers already stopped")
	}
	return addrs, nil
}

// waitClusterOK polls CLUSTER INFO on every node until each reports
// cluster_state:ok, all 16384 slots assigned and ok, and every node known.
func waitClusterOK(addrs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		last = clusterOK(addrs)
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("cluster %s not ready within %v: %v", strings.Join(addrs, ","), timeout, last)
}

// clusterOK checks CLUSTER INFO on every node once.
func clusterOK(addrs []string) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(addrs)),
		"cluster_size":           strconv.Itoa(len(addrs)),
	}
	for _, addr := range addrs {
		info, err := redisCommand(addr, time.Second, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
		}
		fields := infoFields(info)
		for k, v := range want {
			if fields[k] != v {
				return fmt.Errorf("%s: %s is %q, want %q", addr, k, fields[k], v)
			}
		}
	}
	return nil
}
