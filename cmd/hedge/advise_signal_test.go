//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
)

// SIGTERM stops "hedge advise" in its analysis, with the interrupted exit
// code. The signal is sent once the command listens for it, and the
// analysis starts only once it has arrived, so it is under way on any
// schedule; the sample needs no simulation (--sizes is empty), so only
// the analysis's own checks of its context can stop it.
func TestAdviseStopsOnSIGTERM(t *testing.T) {
	in := writeTimed(t, t.TempDir(), 5000, 3)
	real := notifyContext
	t.Cleanup(func() { notifyContext = real })
	notifyContext = func(parent context.Context, sigs ...os.Signal) (context.Context, context.CancelFunc) {
		ctx, stop := real(parent, sigs...)
		if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		<-ctx.Done()
		return ctx, stop
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"advise", "--in", in, "--time-field", "ts", "--replica-field", "host", "--sizes", "", "--out", ""}, &stdout, &stderr)
	if code != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q: want %d, interrupted", code, stderr.String(), exitInterrupted)
	}
}
