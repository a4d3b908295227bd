package testservers

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestRedis(t *testing.T) {
	t.Parallel()
	start := time.Now()
	url := Redis(t)
	t.Logf("Redis (%s) in %v: %s", RedisKind(), time.Since(start).Round(time.Millisecond), url)
	if !strings.HasPrefix(url, "redis://") {
		t.Fatalf("Redis() = %q, want a redis:// URL", url)
	}
	if RedisKind() == "" {
		t.Fatal("RedisKind() is empty after Redis succeeded")
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	if err := pingRedis(addr); err != nil {
		t.Fatalf("PING %s: %v", addr, err)
	}
	if again := Redis(t); again != url {
		t.Fatalf("second Redis() = %q, want the shared %q", again, url)
	}
}

func TestRedisCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	addrs := RedisCluster(t)
	t.Logf("Redis Cluster (%s) in %v: %v", RedisClusterKind(), time.Since(start).Round(time.Millisecond), addrs)
	if len(addrs) < 3 {
		t.Fatalf("RedisCluster() = %v, want at least 3 nodes", addrs)
	}
	for _, addr := range addrs {
		info, err := redisCommand(addr, 2*time.Second, "CLUSTER", "INFO")
		if err != nil {
			t.Fatalf("CLUSTER INFO on %s: %v", addr, err)
		}
		if f := infoFields(info); f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" {
			t.Fatalf("%s: cluster_state=%q cluster_slots_ok=%q", addr, f["cluster_state"], f["cluster_slots_ok"])
		}
	}
	nodes, err := redisCommand(addrs[0], 2*time.Second, "CLUSTER", "NODES")
	if err != nil {
		t.Fatalf("CLUSTER NODES: %v", err)
	}
	masters := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 2 && strings.Contains(fields[2], "master") && !strings.Contains(fields[2], "fail") {
			masters++
		}
	}
	if masters != 3 {
		t.Fatalf("CLUSTER NODES shows %d healthy masters, want 3:\n%s", masters, nodes)
	}

	// A key is served by the node owning its slot, and MOVED elsewhere.
	moved := 0
	for _, addr := range addrs {
		c, err := dialRESP(addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.do("SET", "{testservers}k", "v")
		c.Close()
		var re respError
		if errors.As(err, &re) && strings.HasPrefix(string(re), "MOVED") {
			moved++
		} else if err != nil {
			t.Fatalf("SET on %s: %v", addr, err)
		}
	}
	if moved != len(addrs)-1 {
		t.Fatalf("SET was MOVED by %d of %d nodes, want %d", moved, len(addrs), len(addrs)-1)
	}
}

func TestNewRedisServerStopStart(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := NewRedisServer(t)
	t.Logf("NewRedisServer in %v: %s", time.Since(start).Round(time.Millisecond), s.URL())
	addr := s.Addr()
	if s.URL() != "redis://"+addr+"/0" {
		t.Fatalf("URL() = %q, Addr() = %q", s.URL(), addr)
	}
	set := func(k, v string) {
		t.Helper()
		c, err := dialRESP(addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if r, err := c.str("SET", k, v); err != nil || r != "OK" {
			t.Fatalf("SET %s: %q, %v", k, r, err)
		}
	}
	get := func(k string) string {
		t.Helper()
		v, err := redisCommand(addr, 2*time.Second, "GET", k)
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		return v
	}

	set("before-stop", "1")
	start = time.Now()
	s.Stop()
	t.Logf("Stop in %v", time.Since(start).Round(time.Millisecond))
	if err := pingRedis(addr); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	s.Stop() // stopping twice is harmless
	start = time.Now()
	s.Start()
	t.Logf("Start in %v", time.Since(start).Round(time.Millisecond))
	if s.Addr() != addr {
		t.Fatalf("Addr() after Start = %q, want %q", s.Addr(), addr)
	}
	if err := pingRedis(addr); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}
	if v := get("before-stop"); v != "1" {
		t.Fatalf("GET before-stop after restart = %q, want 1", v)
	}

	set("before-kill", "2")
	s.Kill()
	if err := pingRedis(addr); err == nil {
		t.Fatal("PING succeeded after Kill")
	}
	s.Start()
	s.Start() // starting a running server is harmless
	if v := get("before-kill"); v != "2" {
		t.Fatalf("GET before-kill after crash and restart = %q, want 2", v)
	}
}

func TestNewRedisServerIsPrivate(t *testing.T) {
	t.Parallel()
	a, b := NewRedisServer(t), NewRedisServer(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two private servers share %s", a.Addr())
	}
}

func TestMongo(t *testing.T) {
	t.Parallel()
	start := time.Now()
	uri := Mongo(t)
	t.Logf("Mongo (%s) in %v: %s", MongoKind(), time.Since(start).Round(time.Millisecond), uri)
	if !strings.HasPrefix(uri, "mongodb://") && !strings.HasPrefix(uri, "mongodb+srv://") {
		t.Fatalf("Mongo() = %q, want a mongodb:// URI", uri)
	}
	if MongoKind() == "" {
		t.Fatal("MongoKind() is empty after Mongo succeeded")
	}
	if strings.HasPrefix(uri, "mongodb+srv://") || strings.Contains(uri, "@") {
		t.Skipf("protocol check needs a plain host:port URI without credentials, got %s", uri)
	}
	host := strings.TrimPrefix(uri, "mongodb://")
	host, _, _ = strings.Cut(host, "/")
	host, _, _ = strings.Cut(host, "?")
	host, _, _ = strings.Cut(host, ",")

	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", host, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))

	hello, err := opMsg(conn, 1, bsonDoc(bsonInt32("hello", 1), bsonString("$db", "admin")))
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if ok, _ := hello["ok"].(float64); ok != 1 {
		t.Fatalf("hello answered %v", hello)
	}
	if _, found := hello["maxWireVersion"]; !found {
		t.Fatalf("hello answer lacks maxWireVersion: %v", hello)
	}
	ping, err := opMsg(conn, 2, bsonDoc(bsonInt32("ping", 1), bsonString("$db", "admin")))
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	if ok, _ := ping["ok"].(float64); ok != 1 {
		t.Fatalf("ping answered %v", ping)
	}
	t.Logf("hello: maxWireVersion=%v", hello["maxWireVersion"])
}

func TestLazyReportsFailureToEveryCaller(t *testing.T) {
	var l lazy[string]
	var calls atomic.Int32
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.get(func() (string, string, error) {
				calls.Add(1)
				return "", "x", boom
			})
			if !errors.Is(err, boom) {
				t.Errorf("get() error = %v, want boom", err)
			}
		}()
	}
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("start ran %d times, want 1", calls.Load())
	}
	if l.Kind() != "" {
		t.Fatalf("Kind() after failure = %q, want empty", l.Kind())
	}
}

// recordingTB records how unavailable reported a missing server.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Name() string { return "recordingTB" }

func (r *recordingTB) Helper()                           {}
func (r *recordingTB) Skipf(format string, args ...any)  { r.skipped = format }
func (r *recordingTB) Fatalf(format string, args ...any) { r.failed = format }

func TestUnavailableSkipsOrFails(t *testing.T) {
	t.Setenv(EnvRequireBackends, "")
	skipLog := filepath.Join(t.TempDir(), "skipped")
	t.Setenv(EnvSkipLog, skipLog)
	var r recordingTB
	unavailable(&r, "x", errors.New("no"))
	if r.skipped == "" || r.failed != "" {
		t.Fatalf("without %s: skipped=%q failed=%q, want a skip", EnvRequireBackends, r.skipped, r.failed)
	}
	if b, err := os.ReadFile(skipLog); err != nil || string(b) != "x\trecordingTB\n" {
		t.Fatalf("the skip log holds %q (%v), want the skip noted for make test's summary", b, err)
	}
	t.Setenv(EnvSkipLog, "") // the recording TB's Fatalf returns: no note below
	t.Setenv(EnvRequireBackends, "1")
	r = recordingTB{}
	unavailable(&r, "x", errors.New("no"))
	if r.failed == "" {
		t.Fatalf("with %s=1: no failure reported", EnvRequireBackends)
	}
}

func TestFreeClusterPorts(t *testing.T) {
	ports, err := freeClusterPorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p+clusterBusOffset > 65535 {
			t.Fatalf("bad ports %v", ports)
		}
		seen[p] = true
	}
}

func TestInfoFields(t *testing.T) {
	f := infoFields("# Cluster\r\ncluster_state:ok\r\ncluster_slots_ok:16384\r\n")
	if f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" {
		t.Fatalf("infoFields = %v", f)
	}
}

func TestEnvironmentComesFirst(t *testing.T) {
	t.Setenv(EnvRedisURL, "redis://redis.example:6379/3")
	t.Setenv(EnvRedisClusterAddrs, " a.example:7000,b.example:7000 ,,c.example:7000")
	t.Setenv(EnvMongoURI, "mongodb://mongo.example:27017/?replicaSet=rs0")

	if url, kind, err := startSharedRedis(); err != nil || url != "redis://redis.example:6379/3" || kind != KindEnv {
		t.Errorf("startSharedRedis() = %q, %q, %v", url, kind, err)
	}
	addrs, kind, err := startSharedCluster()
	if err != nil || strings.Join(addrs, ",") != "a.example:7000,b.example:7000,c.example:7000" || kind != KindEnv {
		t.Errorf("startSharedCluster() = %q, %q, %v", addrs, kind, err)
	}
	if uri, kind, err := startSharedMongo(); err != nil || uri != "mongodb://mongo.example:27017/?replicaSet=rs0" || kind != KindEnv {
		t.Errorf("startSharedMongo() = %q, %q, %v", uri, kind, err)
	}
}
