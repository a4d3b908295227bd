package testservers

import (
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

// SentinelMaster is the name the sentinels of a SentinelGroup monitor
// their primary under (the URL's master_name).
const SentinelMaster = "mymaster"

// replUser and replPass are the account replicas of a SentinelGroup
// replicate with, so that CutReplica can shut a replica out.
const replUser, replPass = "repl", "replpw"

// SentinelGroup is a sentinel-managed deployment on loopback: a primary,
// one replica and three sentinels (quorum 2, down-after-milliseconds 500),
// each a child process on a free port with its files in the test's
// temporary directory. The data servers persist every write (append-only
// file, fsync always). Replicas replicate as an ACL user of their own, so
// that a test can cut the replication link (CutReplica) and make a
// replica lag as far as it likes before it kills the primary. Everything
// is stopped at test cleanup.
type SentinelGroup struct {
	tb  testing.TB
	dir string

	mu            sync.Mutex
	servers       map[string]*process // data servers by address
	primary       string              // the address the group started with as primary, or the last promoted one
	sentinels     []string
	sentinelProcs []*process
}

// NewSentinelGroup starts a primary, one replica of it and three sentinels,
// and waits until every sentinel knows the replica and the other two. When
// redis-server or redis-sentinel cannot be started, the test is skipped, or
// fails when SESSIONS_REQUIRE_BACKENDS=1.
func NewSentinelGroup(tb testing.TB) *SentinelGroup {
	tb.Helper()
	for _, bin := range []string{"redis-server", "redis-sentinel"} {
		if _, err := exec.LookPath(bin); err != nil {
			unavailable(tb, "a local sentinel group", fmt.Errorf("%s not found in PATH (install the Debian packages redis-server and redis-sentinel)", bin))
		}
	}
	g := &SentinelGroup{tb: tb, dir: tb.TempDir(), servers: map[string]*process{}}
	tb.Cleanup(g.stop)
	primary, err := g.startData("")
	if err != nil {
		unavailable(tb, "a local sentinel group", err)
	}
	g.primary = primary
	replica, err := g.startData(primary)
	if err != nil {
		unavailable(tb, "a local sentinel group", err)
	}
	if err := waitInSync(replica, 15*time.Second); err != nil {
		unavailable(tb, "a local sentinel group", err)
	}
	for i := 0; i < 3; i++ {
		if err := g.startSentinel(i, primary); err != nil {
			unavailable(tb, "a local sentinel group", err)
		}
	}
	if err := g.waitDiscovery(1, 15*time.Second); err != nil {
		unavailable(tb, "a local sentinel group", err)
	}
	return g
}

// URL returns the deployment's redis+sentinel:// URL, with query (if any)
// appended after master_name.
func (g *SentinelGroup) URL(query string) string {
	u := "redis+sentinel://" + strings.Join(g.sentinels, ",") + "/0?master_name=" + SentinelMaster
	if query != "" {
		u += "&" + query
	}
	return u
}

// Primary returns the address the sentinels name as the primary.
func (g *SentinelGroup) Primary() (string, error) {
	var last error
	for _, s := range g.sentinels {
		addr, err := sentinelMasterAddr(s)
		if err == nil {
			return addr, nil
		}
		last = err
	}
	return "", last
}

// Replicas returns the addresses of the running data servers other than
// the current primary.
func (g *SentinelGroup) Replicas() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for addr, p := range g.servers {
		if done, _ := p.exited(); !done && addr != g.primary {
			out = append(out, addr)
		}
	}
	return out
}

// CutReplica shuts every replica out of the primary: it disables the
// replication account on the primary and closes the replicas'
// connections, so writes the primary takes from now on reach no replica
// (the replicas retry, and fail to authenticate, every second).
func (g *SentinelGroup) CutReplica() error {
	p, err := g.Primary()
	if err != nil {
		return err
	}
	if _, err := redisDo(p, "ACL", "SETUSER", replUser, "off"); err != nil {
		return fmt.Errorf("cut replica: %w", err)
	}
	if _, err := redisDo(p, "CLIENT", "KILL", "USER", replUser); err != nil {
		return fmt.Errorf("cut replica: %w", err)
	}
	return nil
}

// KillPrimary kills the current primary at once (SIGKILL), as a crash
// would, and returns its address.
func (g *SentinelGroup) KillPrimary() (string, error) {
	addr, err := g.Primary()
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	p := g.servers[addr]
	g.mu.Unlock()
	if p == nil {
		return "", fmt.Errorf("the sentinels name %s, which this group did not start", addr)
	}
	p.kill()
	return addr, nil
}

// WaitFailover waits until every sentinel names a primary other than old,
// the same one, and that server answers ROLE as a master, and returns its
// address. (The sentinel that led the failover knows first; the others
// learn it from its hello messages, and clients may ask any of them.)
func (g *SentinelGroup) WaitFailover(old string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if addr, ok := g.agreed(old); ok {
			if role, err := redisDo(addr, "ROLE"); err == nil && len(role.([]any)) > 0 && role.([]any)[0] == "master" {
				g.mu.Lock()
				g.primary = addr
				g.mu.Unlock()
				return addr, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("no failover away from %s within %v", old, timeout)
}

// agreed returns the primary every sentinel names, if they agree on one
// other than old.
func (g *SentinelGroup) agreed(old string) (string, bool) {
	var addr string
	for _, s := range g.sentinels {
		a, err := sentinelMasterAddr(s)
		if err != nil || a == old || (addr != "" && a != addr) {
			return "", false
		}
		addr = a
	}
	return addr, addr != ""
}

// StartReplica starts a new, empty replica of the current primary (as a
// replacement for a dead server would be) and waits until its link is up.
func (g *SentinelGroup) StartReplica(timeout time.Duration) (string, error) {
	p, err := g.Primary()
	if err != nil {
		return "", err
	}
	addr, err := g.startData(p)
	if err != nil {
		return "", err
	}
	return addr, waitInSync(addr, timeout)
}

// waitInSync waits until the replica at addr has its link to its primary
// up (the initial sync done).
func waitInSync(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		info, err := redisCommand(addr, time.Second, "INFO", "replication")
		if err == nil && infoFields(info)["master_link_status"] == "up" {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("replica %s not in sync within %v", addr, timeout)
}

// startData starts a data server, a replica of of unless of is empty, and
// returns its address.
func (g *SentinelGroup) startData(of string) (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errNoRedisServer
	}
	var last error
	for try := 0; try < startRetries; try++ {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		dir := filepath.Join(g.dir, "data-"+strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		args := []string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--daemonize", "no", "--protected-mode", "no", "--logfile", "",
			"--save", "", "--appendonly", "yes", "--appendfsync", "always",
			"--repl-diskless-sync-delay", "0",
			"--user", replUser, "on", ">" + replPass, "~*", "&*", "+@all",
		}
		if of != "" {
			host, port, _ := strings.Cut(of, ":")
			args = append(args, "--replicaof", host, port, "--masteruser", replUser, "--masterauth", replPass)
		}
		p, err := startProcess("redis-server on "+addr, dir, filepath.Join(dir, "redis.log"), bin, args...)
		if err != nil {
			return "", err
		}
		if err := waitRedis(p, addr, redisReadyTimeout); err != nil {
			p.kill()
			last = p.failure(err)
			continue
		}
		g.mu.Lock()
		g.servers[addr] = p
		g.mu.Unlock()
		return addr, nil
	}
	return "", last
}

// startSentinel starts sentinel i, monitoring primary.
func (g *SentinelGroup) startSentinel(i int, primary string) error {
	bin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		return err
	}
	host, pport, _ := strings.Cut(primary, ":")
	var last error
	for try := 0; try < startRetries; try++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		dir := filepath.Join(g.dir, fmt.Sprintf("sentinel-%d-%d", i, port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf(`bind 127.0.0.1
port %d
protected-mode no
daemonize no
dir %s
sentinel monitor %s %s %s 2
sentinel down-after-milliseconds %s 500
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, port, dir, SentinelMaster, host, pport, SentinelMaster, SentinelMaster, SentinelMaster)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := startProcess("redis-sentinel on "+addr, dir, filepath.Join(dir, "sentinel.log"), bin, conf)
		if err != nil {
			return err
		}
		if err := waitPing(p, addr, redisReadyTimeout); err != nil {
			p.kill()
			last = p.failure(err)
			continue
		}
		g.mu.Lock()
		g.sentinelProcs = append(g.sentinelProcs, p)
		g.sentinels = append(g.sentinels, addr)
		g.mu.Unlock()
		return nil
	}
	return last
}

// waitPing polls addr until it answers PING, or p exits, or timeout passes.
func waitPing(p *process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if done, _ := p.exited(); done {
			return fmt.Errorf("exited before answering PING on %s (last error: %v)", addr, last)
		}
		if last = pingRedis(addr); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no PONG from %s within %v: %v", addr, timeout, last)
}

// waitDiscovery waits until every sentinel knows replicas replicas and
// the other sentinels.
func (g *SentinelGroup) waitDiscovery(replicas int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		last = nil
		for _, s := range g.sentinels {
			info, err := redisCommand(s, time.Second, "INFO", "sentinel")
			if err != nil {
				last = err
				break
			}
			// master0:name=mymaster,status=ok,address=...,slaves=1,sentinels=3
			line := infoFields(info)["master0"]
			want := fmt.Sprintf("slaves=%d,sentinels=%d", replicas, len(g.sentinels))
			if !strings.Contains(line, want) {
				last = fmt.Errorf("sentinel %s sees %q, want %s", s, line, want)
				break
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("sentinels not ready within %v: %v", timeout, last)
}

// redisDo dials addr, runs one command and closes the connection.
func redisDo(addr string, args ...string) (any, error) {
	c, err := dialRESP(addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.do(args...)
}

// sentinelMasterAddr asks sentinel s for the primary's address.
func sentinelMasterAddr(s string) (string, error) {
	v, err := redisDo(s, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil {
		return "", err
	}
	parts, ok := v.([]any)
	if !ok || len(parts) != 2 {
		return "", fmt.Errorf("sentinel %s: unexpected reply %v", s, v)
	}
	host, _ := parts[0].(string)
	port, _ := parts[1].(string)
	return host + ":" + port, nil
}

// stop kills every process of the group.
func (g *SentinelGroup) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.servers {
		p.kill()
	}
	for _, p := range g.sentinelProcs {
		p.kill()
	}
	if g.tb.Failed() {
		g.tb.Logf("sentinel group files and logs under %s", g.dir)
	}
}
