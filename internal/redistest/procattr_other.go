//go:build !linux

package redistest

import (
	"errors"
)

// processStopped is not known outside Linux: Stall probes with PING
// instead.
func processStopped(int) (bool, error) { return false, errors.ErrUnsupported }
