package pgtest

import (
	"os"
	"syscall"
)

// sysProcAttr has nothing to add on Windows, where postgres is not run as
// another user by this package.
func sysProcAttr(*runAs) *syscall.SysProcAttr { return nil }

// immediateShutdown ends the postmaster at once (Windows has no SIGQUIT:
// its backends are left to notice).
var immediateShutdown os.Signal = os.Kill
