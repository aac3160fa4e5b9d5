//go:build !linux

package promtest

import "syscall"

// sysProcAttr has nothing to add outside Linux: the server is stopped by
// Stop, or outlives a test binary that was killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }
