package testservers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// dockerPingTimeout bounds the cheap check for a Docker engine.
const dockerPingTimeout = 2 * time.Second

var docker struct {
	once sync.Once
	err  error
}

// dockerEngine reports, once per process, whether a Docker engine answers,
// so that the testcontainers path (which needs the launcher built) is tried
// only then. It asks the engine's /_ping endpoint on DOCKER_HOST, or else on
// /var/run/docker.sock and the rootless socket, with a short timeout. It
// returns nil when an engine answers, or why none does.
func dockerEngine() error {
	docker.once.Do(func() { docker.err = findDockerEngine() })
	return docker.err
}

func findDockerEngine() error {
	if os.Getenv(EnvDocker) == "0" {
		return fmt.Errorf("disabled by %s=0", EnvDocker)
	}
	if host := os.Getenv("DOCKER_HOST"); host != "" {
		if err := pingDocker(host); err != nil {
			return fmt.Errorf("no Docker engine answers at DOCKER_HOST=%s: %w", host, err)
		}
		return nil
	}
	socks := []string{"/var/run/docker.sock"}
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		socks = append(socks, filepath.Join(rt, "docker.sock"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		socks = append(socks, filepath.Join(home, ".docker", "run", "docker.sock"))
	}
	var errs []string
	for _, s := range socks {
		err := pingDocker("unix://" + s)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("no Docker engine answers (DOCKER_HOST unset): %s", strings.Join(errs, "; "))
}

// pingDocker sends GET /_ping to the engine at host (unix:// or tcp://) and
// expects 200 OK.
func pingDocker(host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return err
	}
	var network, addr string
	switch u.Scheme {
	case "unix":
		network, addr = "unix", u.Path
	case "tcp":
		network, addr = "tcp", u.Host
	default:
		return fmt.Errorf("unsupported DOCKER_HOST scheme %q", u.Scheme)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dockerPingTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if network == "tcp" && os.Getenv("DOCKER_TLS_VERIFY") != "" {
		// A TLS engine answered the dial; let testcontainers do the rest.
		return nil
	}
	_ = conn.SetDeadline(time.Now().Add(dockerPingTimeout))
	if _, err := fmt.Fprintf(conn, "GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(addr + ": /_ping answered " + resp.Status)
	}
	return nil
}
