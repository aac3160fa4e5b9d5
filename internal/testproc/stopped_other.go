//go:build !linux

package testproc

import (
	"errors"
	"time"
)

// Stopped is not known outside Linux: it returns errors.ErrUnsupported.
func Stopped(int) (bool, error) { return false, errors.ErrUnsupported }

// WaitStopped is not known outside Linux: it returns
// errors.ErrUnsupported.
func WaitStopped(int, time.Duration) error { return errors.ErrUnsupported }
