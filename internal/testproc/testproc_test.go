package testproc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startSleep starts sleep(1) for seconds, or skips the test without it.
func startSleep(t *testing.T, seconds string) *Proc {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	p, err := Start(exec.Command(sleep, seconds))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStop(t *testing.T) {
	p := startSleep(t, "600")
	if p.Exited() {
		t.Fatal("exited before it was stopped")
	}
	// SIGTERM, and SIGKILL should it not act within a minute (it does at
	// once): either way Stop returns once the process was reaped.
	if err := p.Stop("test", syscall.SIGTERM, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() || p.Err() == nil {
		t.Fatalf("after Stop: exited %v, err %v", p.Exited(), p.Err())
	}
	if err := p.Stop("test", syscall.SIGTERM, time.Minute, nil); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

func TestTail(t *testing.T) {
	tail := Tail{Max: 4}
	for _, s := range []string{"01", "234", "56789"} {
		tail.Write([]byte(s))
	}
	if got := tail.String(); got != "6789" {
		t.Fatalf("tail %q, want the last 4 bytes, 6789", got)
	}
}
