package testproc

import (
	"syscall"
	"testing"
	"time"
)

func TestStopped(t *testing.T) {
	p := startSleep(t, "600")
	defer p.Kill()
	if stopped, err := Stopped(p.Pid); err != nil || stopped {
		t.Fatalf("a running sleep: stopped %v, %v; want false", stopped, err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The kernel stops it soon after the signal; the bound is for a
	// broken system only.
	if err := WaitStopped(p.Pid, time.Minute); err != nil {
		t.Fatal(err)
	}
	if stopped, err := Stopped(p.Pid); err != nil || !stopped {
		t.Fatalf("after WaitStopped: stopped %v, %v; want true", stopped, err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := Stopped(-1); err == nil {
		t.Error("Stopped(-1): no error, want one: there is no such process")
	}
}

// WaitStopped fails at once for a process that is gone, and says so.
func TestWaitStoppedGone(t *testing.T) {
	p := startSleep(t, "600")
	p.Kill()
	<-p.Done()
	if err := WaitStopped(p.Pid, time.Minute); err == nil {
		t.Fatal("WaitStopped on a process that exited: no error")
	}
}
