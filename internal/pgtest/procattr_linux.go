package pgtest

import (
	"os"
	"syscall"
)

// sysProcAttr runs the process as cred (nil: as ourselves) and asks the
// kernel to kill it if the process that started it dies without stopping
// it (a test binary killed by a timeout), so that no postgres outlives its
// test run. A postmaster that dies takes its backends with it.
func sysProcAttr(cred *runAs) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cred != nil {
		a.Credential = &syscall.Credential{Uid: cred.uid, Gid: cred.gid}
	}
	return a
}

// immediateShutdown is the signal that makes the postmaster end every
// process at once, as pg_ctl stop -m immediate does.
var immediateShutdown os.Signal = syscall.SIGQUIT
