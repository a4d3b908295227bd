//go:build !linux

package testservers

import "syscall"

// setDeathSignal does nothing outside Linux, which alone has a parent-death
// signal; there, servers rely on Main (and the launcher on stdin EOF) to stop.
func setDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {}
