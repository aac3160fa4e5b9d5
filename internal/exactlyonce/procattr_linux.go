package exactlyonce

import "syscall"

// sysProcAttr asks the kernel to kill a replica if the process that
// started it dies without stopping it, so that no replica outlives its
// run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
