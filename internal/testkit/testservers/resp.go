package testservers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// respConn is a minimal RESP2 client, enough to check that a Redis server is
// up (PING, INFO, CLUSTER INFO) without a Redis library.
type respConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// respError is an error reply ("-ERR ...") from the server.
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

// dialRESP connects to a Redis server at addr. timeout bounds the dial and
// every later command.
func dialRESP(addr string, timeout time.Duration) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		c.Close()
		return nil, err
	}
	return &respConn{conn: c, r: bufio.NewReader(c)}, nil
}

// Close closes the connection.
func (c *respConn) Close() error { return c.conn.Close() }

// do sends one command and returns its reply: a string for simple strings
// and bulk strings, an int64 for integers, a []any for arrays, nil for a nil
// reply, and a respError for an error reply.
func (c *respConn) do(args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		return nil, err
	}
	return c.read()
}

// str sends a command whose reply is a string.
func (c *respConn) str(args ...string) (string, error) {
	v, err := c.do(args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redis %s: got %T reply, want a string", args[0], v)
	}
	return s, nil
}

func (c *respConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply line")
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+':
		return rest, nil
	case '-':
		return nil, respError(rest)
	case ':':
		return strconv.ParseInt(rest, 10, 64)
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return nil, fmt.Errorf("redis: bad bulk length %q", rest)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return nil, fmt.Errorf("redis: bad array length %q", rest)
		}
		if n < 0 {
			return nil, nil
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = c.read(); err != nil {
				return nil, err
			}
		}
		return arr, nil
	default:
		return nil, fmt.Errorf("redis: unexpected reply %q", line)
	}
}

// infoFields parses the "key:value" lines of an INFO or CLUSTER INFO reply.
func infoFields(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// redisCommand dials addr, runs one command that returns a string and
// closes the connection.
func redisCommand(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := dialRESP(addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.str(args...)
}
