//go:build !linux

package testproc

import "errors"

// Stopped is not known outside Linux: it returns errors.ErrUnsupported.
func Stopped(int) (bool, error) { return false, errors.ErrUnsupported }
