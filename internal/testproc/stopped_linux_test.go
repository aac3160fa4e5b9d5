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
	deadline := time.Now().Add(time.Minute)
	for {
		stopped, err := Stopped(p.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if stopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep not stopped a minute after SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := Stopped(-1); err == nil {
		t.Error("Stopped(-1): no error, want one: there is no such process")
	}
}
