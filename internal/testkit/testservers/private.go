package testservers

import (
	"strconv"
	"sync"
	"time"
)

// private is what the restartable private servers (RedisServer, FerretDB)
// share: the port they keep across restarts, and the running process.
type private struct {
	mu    sync.Mutex
	port  int
	proc  *process
	grace time.Duration // how long a graceful stop may take before a kill
}

// running reports whether the server's process is alive; mu is held.
func (s *private) running() bool {
	if s.proc == nil {
		return false
	}
	done, _ := s.proc.exited()
	return !done
}

// stop stops the server, gracefully or with SIGKILL, and waits for it to
// exit. Stopping a stopped server does nothing.
func (s *private) stop(kill bool) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	if kill {
		p.kill()
	} else {
		p.stop(s.grace)
	}
}

// startNewPort starts the server with start on a free port, choosing
// another one when the port was taken before the server could bind it.
func (s *private) startNewPort(start func(port int) (*process, error)) error {
	var tried attempts
	for range startRetries {
		port, err := freePort()
		if err != nil {
			return err
		}
		p, err := start(port)
		if err == nil {
			s.mu.Lock()
			s.port, s.proc = port, p
			s.mu.Unlock()
			return nil
		}
		tried.add("port "+strconv.Itoa(port), err)
	}
	return tried
}
