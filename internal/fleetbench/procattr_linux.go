package fleetbench

import "syscall"

// sysProcAttr asks the kernel to kill a worker if the process that
// started it dies without stopping it, so that no worker outlives its
// run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
