//go:build !unix

package redistest

import "os"

// stopSignal and contSignal are nil where a process cannot be stopped and
// continued: Stall reports that it is not supported.
var stopSignal, contSignal os.Signal
