//go:build !linux

package exactlyonce

import "syscall"

// sysProcAttr has nothing to add outside Linux: replicas are stopped by
// Run, or outlive a run that was killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }
