package testservers

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	start := time.Now()
	dsn := Postgres(t)
	t.Logf("PostgreSQL (%s) in %v: %s", PostgresKind(), time.Since(start).Round(time.Millisecond), dsn)
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("Postgres() = %q, want a postgres:// URL (%v)", dsn, err)
	}
	if PostgresKind() == "" {
		t.Fatal("PostgresKind() is empty after Postgres succeeded")
	}
	if again := Postgres(t); again != dsn {
		t.Fatalf("second Postgres() = %q, want the shared %q", again, dsn)
	}
	if PostgresKind() != KindLocalPostgres {
		return // a server we did not start may want a password or TLS
	}
	got, err := pgSimpleQuery(u.Host, u.User.Username(), strings.TrimPrefix(u.Path, "/"),
		"SELECT current_setting('server_version_num') || ' ' || current_setting('fsync')")
	if err != nil {
		t.Fatalf("query %s: %v", u.Host, err)
	}
	t.Logf("server_version_num, fsync: %s", got)
	if !strings.HasSuffix(got, " off") {
		t.Fatalf("the throwaway cluster runs with fsync %q, want off", got)
	}
}

// TestPostgresNotRoot checks that the local cluster does not run as root,
// which PostgreSQL refuses: the server process's real uid is the postgres
// user's when the tests run as root.
func TestPostgresNotRoot(t *testing.T) {
	Postgres(t)
	if PostgresKind() != KindLocalPostgres {
		t.Skipf("the server is %q, not a local cluster", PostgresKind())
	}
	if os.Geteuid() != 0 {
		t.Skip("not running as root: the cluster runs as this user")
	}
	owner, err := postgresOwner()
	if err != nil || owner.cred == nil {
		t.Fatalf("postgresOwner() = %+v, %v", owner, err)
	}
	var pids []int
	matches, _ := os.ReadDir("/proc")
	for _, m := range matches {
		status, err := os.ReadFile("/proc/" + m.Name() + "/status")
		if err != nil || !strings.Contains(string(status), "\nPPid:\t"+fmt.Sprint(os.Getpid())+"\n") {
			continue
		}
		if !strings.HasPrefix(string(status), "Name:\tpostgres") {
			continue
		}
		var pid int
		fmt.Sscan(m.Name(), &pid)
		pids = append(pids, pid)
		want := fmt.Sprintf("\nUid:\t%d\t", owner.cred.Uid)
		if !strings.Contains(string(status), want) {
			t.Errorf("postgres process %d does not run as uid %d:\n%s", pid, owner.cred.Uid, status)
		}
	}
	if len(pids) == 0 {
		t.Fatal("found no postgres child of this process")
	}
}

// pgSimpleQuery connects to a trust-authenticated server with the frontend
// protocol 3.0, runs one simple query returning one text value, and
// returns it. Just enough of the protocol to check the server, with the
// standard library only.
func pgSimpleQuery(addr, user, db, query string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var body []byte
	body = binary.BigEndian.AppendUint32(body, 3<<16)
	for _, kv := range []string{"user", user, "database", db} {
		body = append(append(body, kv...), 0)
	}
	body = append(body, 0)
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))
	if _, err := c.Write(append(msg, body...)); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	sentQuery := false
	value := ""
	for {
		typ, payload, err := pgReadMessage(r)
		if err != nil {
			return "", err
		}
		switch typ {
		case 'R':
			if binary.BigEndian.Uint32(payload) != 0 {
				return "", fmt.Errorf("server wants authentication method %d", binary.BigEndian.Uint32(payload))
			}
		case 'E':
			return "", fmt.Errorf("server error: %q", payload)
		case 'D':
			if len(payload) < 6 {
				return "", fmt.Errorf("short DataRow")
			}
			n := int32(binary.BigEndian.Uint32(payload[2:6]))
			if n >= 0 && int(n) <= len(payload)-6 {
				value = string(payload[6 : 6+n])
			}
		case 'Z':
			if sentQuery {
				return value, nil
			}
			q := append([]byte(query), 0)
			m := append([]byte{'Q'}, binary.BigEndian.AppendUint32(nil, uint32(len(q)+4))...)
			if _, err := c.Write(append(m, q...)); err != nil {
				return "", err
			}
			sentQuery = true
		}
	}
}

func pgReadMessage(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<20 {
		return 0, nil, fmt.Errorf("message length %d", n)
	}
	payload := make([]byte, n-4)
	_, err := io.ReadFull(r, payload)
	return hdr[0], payload, err
}
