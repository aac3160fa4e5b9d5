//go:build !unix

package promtest

import "os"

// termSignal is os.Kill where there is no SIGTERM.
var termSignal = os.Kill
