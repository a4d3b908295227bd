//go:build !linux

package linearize

import "time"

// Now is the wall clock in nanoseconds where CLOCK_MONOTONIC is not known
// to be system-wide: comparable across processes only as far as the wall
// clock does not step.
func Now() int64 { return time.Now().UnixNano() }
