package linearize

import "golang.org/x/sys/unix"

// Now reads CLOCK_MONOTONIC, in nanoseconds. On Linux that clock is one for
// the whole system, so times that several processes read are comparable,
// unlike Go's monotonic readings, whose origin is each process's start.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("linearize: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
