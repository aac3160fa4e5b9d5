//go:build unix

package pgtest

import (
	"os"
	"syscall"

	"github.com/tailcut/hedge/internal/testproc"
)

// sysProcAttr runs the process as cred (nil: as ourselves), with
// testproc.SysProcAttr's attributes: on Linux the kernel kills it if the
// process that started it dies without stopping it (a test binary killed
// by a timeout), so that no postgres outlives its test run, and a
// postmaster that dies takes its backends with it.
func sysProcAttr(cred *runAs) *syscall.SysProcAttr {
	a := testproc.SysProcAttr()
	if cred != nil {
		if a == nil {
			a = &syscall.SysProcAttr{}
		}
		a.Credential = &syscall.Credential{Uid: cred.uid, Gid: cred.gid}
	}
	return a
}

// immediateShutdown is the signal that makes the postmaster end every
// process at once, as pg_ctl stop -m immediate does.
var immediateShutdown os.Signal = syscall.SIGQUIT
