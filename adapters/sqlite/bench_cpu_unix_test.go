//go:build unix

package sqlite

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system, all threads) the process
// used so far: on a busy machine it measures work where wall-clock time
// also measures waiting for a CPU.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
