package testproc

import "syscall"

// SysProcAttr asks the kernel to kill the process if the process that
// started it dies without stopping it (a test binary killed by a
// timeout), so that no server outlives its test run. Pdeathsig is tied to
// the OS thread that forked; the Go runtime does not end threads that
// have not been locked, so in practice it is the process.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
