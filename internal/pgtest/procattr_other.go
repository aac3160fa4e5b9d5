//go:build unix && !linux

package pgtest

import (
	"os"
	"syscall"
)

// sysProcAttr runs the process as cred (nil: as ourselves); outside Linux
// a cluster outlives a test binary that was killed.
func sysProcAttr(cred *runAs) *syscall.SysProcAttr {
	if cred == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: cred.uid, Gid: cred.gid}}
}

// immediateShutdown is the signal that makes the postmaster end every
// process at once, as pg_ctl stop -m immediate does.
var immediateShutdown os.Signal = syscall.SIGQUIT
