package testservers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a local server process started by this package. Its output
// goes to a log file, quoted in errors when it fails.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed

	// askStop asks the process to exit; nil means send SIGTERM.
	askStop func()

	stopOnce sync.Once
}

// startProcess starts bin with args in dir, writing its stdout and stderr to
// logPath. The process gets SIGKILL as its parent-death signal (see
// setDeathSignal), so it does not outlive the test process even when that
// crashes.
func startProcess(name, dir, logPath, bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	return startCmd(name, logPath, cmd, syscall.SIGKILL)
}

// startCmd starts cmd, sending its stderr, and its stdout unless already
// set, to logPath. deathSig is sent to it when the test process dies. A
// SysProcAttr already set (a credential) is kept.
func startCmd(name, logPath string, cmd *exec.Cmd, deathSig syscall.Signal) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	}
	cmd.Stderr = logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	setDeathSignal(cmd.SysProcAttr, deathSig)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop asks the process to exit (askStop, by default SIGTERM) and waits up
// to grace for it, then kills it. It is safe to call more than once.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		if p.askStop != nil {
			p.askStop()
		} else {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// kill kills the process at once (SIGKILL) and waits for it to exit.
func (p *process) kill() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// failure describes why the process is not usable, quoting its exit status
// and the end of its log.
func (p *process) failure(err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", p.name, err)
	if done, werr := p.exited(); done {
		fmt.Fprintf(&b, " (exited: %v)", werr)
	}
	if tail := logTail(p.logPath, 1500); tail != "" {
		fmt.Fprintf(&b, "; log %s ends with:\n%s", p.logPath, tail)
	}
	return fmt.Errorf("%s", b.String())
}

// logTail returns about the last max bytes of the file at path.
func logTail(path string, max int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(data) > max {
		data = data[len(data)-max:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return strings.TrimSpace(string(data))
}
