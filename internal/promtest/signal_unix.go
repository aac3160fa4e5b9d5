//go:build unix

package promtest

import (
	"os"
	"syscall"
)

// termSignal asks the server to shut down cleanly.
var termSignal os.Signal = syscall.SIGTERM
