//go:build !linux

package redistest

import (
	"errors"
	"syscall"
)

// sysProcAttr has nothing to add outside Linux: the servers are stopped by
// Stop, or outlive a test binary that was killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// processStopped is not known outside Linux: Stall probes with PING
// instead.
func processStopped(int) (bool, error) { return false, errors.ErrUnsupported }
