//go:build !unix

package sqlite

import "time"

// cpuTime is not measured on this platform; benchmarks report no CPU
// metrics.
func cpuTime() time.Duration { return 0 }
