//go:build !linux

package testproc

import "syscall"

// SysProcAttr has nothing to add outside Linux: a server is stopped by
// its harness, or outlives a test binary that was killed.
func SysProcAttr() *syscall.SysProcAttr { return nil }
