package testservers

import "syscall"

// setDeathSignal asks the kernel to send sig to the child when the test
// process dies, so servers do not outlive a crashed or killed test binary.
func setDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}
