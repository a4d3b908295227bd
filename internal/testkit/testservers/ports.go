package testservers

import (
	"fmt"
	"net"
	"strconv"
)

// startRetries is how many times a local server is started on a new port
// when the previous port was taken between choosing it and binding it.
const startRetries = 3

// freePort returns a loopback TCP port that was free a moment ago: it
// listens on 127.0.0.1:0, notes the port and closes the listener. Another
// process may take the port before the caller binds it, so callers retry.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether port can be bound on 127.0.0.1 right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// clusterBusOffset is the distance from a Redis Cluster node's client port to
// its cluster bus port.
const clusterBusOffset = 10000

// freeClusterPorts returns n distinct free loopback ports p such that p+10000,
// the node's cluster bus port, is free as well.
func freeClusterPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 200 {
			return nil, fmt.Errorf("found only %d of %d free loopback port pairs (port and port+%d)", len(ports), n, clusterBusOffset)
		}
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if p+clusterBusOffset > 65535 || seen[p] || seen[p+clusterBusOffset] || !portFree(p+clusterBusOffset) {
			continue
		}
		seen[p], seen[p+clusterBusOffset] = true, true
		ports = append(ports, p)
	}
	return ports, nil
}
