//go:build unix

package redistest

import (
	"os"
	"syscall"
)

// stopSignal and contSignal stop and continue a server for Stall.
var stopSignal, contSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
