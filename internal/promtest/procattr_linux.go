package promtest

import "syscall"

// sysProcAttr asks the kernel to kill the server if the process that
// started it dies without stopping it (a test binary killed by a timeout),
// so that no prometheus outlives its test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
