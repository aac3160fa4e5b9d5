//go:build !linux

package redistest

import "syscall"

// sysProcAttr has nothing to add outside Linux: the servers are stopped by
// Stop, or outlive a test binary that was killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }
