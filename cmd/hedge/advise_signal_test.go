//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM stops "hedge advise" in its analysis, with the interrupted exit
// code. The signal is sent once the command listens for it, and the
// analysis starts only once it has arrived, so it is under way on any
// schedule; the sample needs no simulation (--sizes is empty), so only
// the analysis's own checks of its context can stop it.
func TestAdviseStopsOnSIGTERM(t *testing.T) {
	var b strings.Builder
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for k := range 5000 {
		x := time.Duration(1+k%7) * time.Millisecond
		if k%50 == 3 {
			x *= 20
		}
		fmt.Fprintf(&b, "{\"ts\":%q,\"latency\":%q,\"host\":\"r%d\"}\n", t0.Add(time.Duration(k)*4*time.Millisecond).Format(time.RFC3339Nano), x, k%3)
	}
	in := filepath.Join(t.TempDir(), "lat.jsonl")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
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
