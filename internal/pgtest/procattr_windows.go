package pgtest

import "syscall"

// sysProcAttr has nothing to add on Windows, where postgres is not run as
// another user by this package.
func sysProcAttr(*runAs) *syscall.SysProcAttr { return nil }
