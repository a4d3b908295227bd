// Package faultproxy is a TCP proxy on loopback that injects network faults
// between a client and a real server, for the reliability tests: added
// latency, a connection cut in the middle of a command, and the lost
// acknowledgement, where the server has applied a write but its reply never
// reaches the client.
//
// It is a few hundred lines of our own rather than toxiproxy because the
// lost acknowledgement needs to know when the server has answered (the first
// reply bytes after a request), which toxiproxy's toxics do not expose.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Fault says what the proxy does to the next exchanges.
type Fault int

// The faults.
const (
	// None forwards every byte both ways.
	None Fault = iota
	// CutRequest closes both sides after forwarding part of the next
	// request: the server sees a truncated command and the client an error.
	CutRequest
	// LoseReply forwards the next request whole, waits for the server's
	// first reply bytes (the write is then applied), and closes both sides
	// without forwarding them: the lost acknowledgement.
	LoseReply
	// Refuse closes every new connection at once, as a down server does.
	Refuse
)

// Proxy forwards connections from its loopback address to a target.
type Proxy struct {
	target string
	ln     net.Listener

	fault   atomic.Int32
	once    atomic.Bool // the fault applies once, then None
	delay   atomic.Int64
	matchMu sync.Mutex
	match   func(request []byte) bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	// Injected counts the faults applied.
	Injected atomic.Int64
}

// Start listens on a free loopback port and forwards to target
// ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set makes f apply to every exchange from now on (match nil) or to every
// request for which match reports true; Set(None, nil) heals.
func (p *Proxy) Set(f Fault, match func(request []byte) bool) {
	p.matchMu.Lock()
	p.match = match
	p.matchMu.Unlock()
	p.once.Store(false)
	p.fault.Store(int32(f))
}

// Once is Set for the first matching request only; the proxy heals after.
func (p *Proxy) Once(f Fault, match func(request []byte) bool) {
	p.Set(f, match)
	p.once.Store(true)
}

// Delay adds d before forwarding each chunk in either direction.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// CloseAll cuts every open connection (a server restart, seen from the
// client), leaving the proxy listening.
func (p *Proxy) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CloseAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if Fault(p.fault.Load()) == Refuse {
			p.Injected.Add(1)
			_ = client.Close()
			continue
		}
		if !p.track(client) {
			return
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// take reports whether the current fault applies to request, consuming it
// when it applies once.
func (p *Proxy) take(request []byte) Fault {
	f := Fault(p.fault.Load())
	if f == None || f == Refuse {
		return None
	}
	p.matchMu.Lock()
	m := p.match
	p.matchMu.Unlock()
	if m != nil && !m(request) {
		return None
	}
	if p.once.Load() && !p.fault.CompareAndSwap(int32(f), int32(None)) {
		return None
	}
	p.Injected.Add(1)
	return f
}

func (p *Proxy) sleep() {
	if d := time.Duration(p.delay.Load()); d > 0 {
		time.Sleep(d)
	}
}

// serve relays one connection. Requests are relayed chunk by chunk as they
// arrive; a chunk is what one Read returns, which on loopback is one
// command (or one pipeline) in practice: matchers look at a chunk.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)

	// loseNext is set while a request whose reply must be lost is in
	// flight: the relay from the server drops its first bytes and cuts.
	var loseNext atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		clientGone := false
		for {
			n, err := server.Read(buf)
			if n > 0 && !clientGone {
				if loseNext.Load() {
					_ = client.Close()
					_ = server.Close()
					return
				}
				p.sleep()
				if _, werr := client.Write(buf[:n]); werr != nil {
					// The client is gone; keep reading until the server has
					// finished what it was sent and closes.
					clientGone = true
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			switch p.take(buf[:n]) {
			case CutRequest:
				_, _ = server.Write(buf[:n/2])
				_ = server.Close()
				_ = client.Close()
				<-done
				return
			case LoseReply:
				loseNext.Store(true)
			}
			p.sleep()
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			// The client is gone or done: half-close toward the server so
			// that it finishes every request it already received, as it
			// would for a client that died, and closes its side.
			if tc, ok := server.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				_ = server.Close()
			}
			break
		}
	}
	<-done
}

// Drain waits until every relayed connection has ended: each client that
// went away has had its requests finished by the server. It reports
// whether that happened within timeout.
func (p *Proxy) Drain(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		n := len(p.conns)
		p.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
