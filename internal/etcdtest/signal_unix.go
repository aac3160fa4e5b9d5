//go:build unix

package etcdtest

import (
	"os"
	"syscall"
)

// stopSignal ends a member cleanly; pauseSignal and contSignal pause and
// continue it.
var stopSignal, pauseSignal, contSignal os.Signal = syscall.SIGTERM, syscall.SIGSTOP, syscall.SIGCONT
