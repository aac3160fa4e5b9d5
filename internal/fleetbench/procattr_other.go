//go:build !linux

package fleetbench

import "syscall"

// sysProcAttr has nothing to add outside Linux: workers end when their
// stdin closes, or outlive a run that was killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }
