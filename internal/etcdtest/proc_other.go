//go:build !linux

package etcdtest

import "errors"

// processStopped cannot tell outside Linux.
func processStopped(int) (bool, error) { return false, errors.ErrUnsupported }
