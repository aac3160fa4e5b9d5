package testproc

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// recorder is a TB that records what Need asked of it.
type recorder struct {
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }
func (r *recorder) Cleanup(func())                    {}

func TestDepsRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv(RequireDepsEnv, v)
		if got := DepsRequired(); got != want {
			t.Errorf("%s=%q: DepsRequired %v, want %v", RequireDepsEnv, v, got, want)
		}
	}
}

func TestNeed(t *testing.T) {
	missing := errors.New("thing is missing: install it with `apt-get install -y thing`")
	t.Setenv(RequireDepsEnv, "")
	var r recorder
	if !Need(&r, nil) || r.fatal != "" || r.skip != "" {
		t.Errorf("Need with nothing missing: %+v", r)
	}
	if Need(&r, missing) || r.fatal != "" || !strings.Contains(r.skip, "apt-get install -y thing") {
		t.Errorf("Need with the dependency missing: %+v, want a skip that says how to install it", r)
	}
	t.Setenv(RequireDepsEnv, "1")
	r = recorder{}
	if Need(&r, missing) || r.skip != "" || !strings.Contains(r.fatal, RequireDepsEnv) {
		t.Errorf("Need with the dependency missing and required: %+v, want a failure", r)
	}
}

func TestOnFreePort(t *testing.T) {
	var ports []int
	n, err := OnFreePort(5, func(port int) (int, error) {
		ports = append(ports, port)
		if len(ports) < 3 {
			return 0, fmt.Errorf("port %d taken", port)
		}
		return port, nil
	})
	if err != nil || len(ports) != 3 || n != ports[2] || n <= 0 {
		t.Fatalf("OnFreePort: %d, %v after ports %v; want the third port", n, err, ports)
	}
	calls := 0
	_, err = OnFreePort(2, func(port int) (int, error) {
		calls++
		return 0, fmt.Errorf("attempt %d failed", calls)
	})
	if calls != 2 || err == nil || !strings.Contains(err.Error(), "attempt 1 failed") || !strings.Contains(err.Error(), "attempt 2 failed") {
		t.Fatalf("OnFreePort failing: %d calls, %v; want 2 calls and both errors", calls, err)
	}
}

func TestWaitReady(t *testing.T) {
	p := startSleep(t, "600")
	defer p.Stop("test", syscall.SIGTERM, time.Minute, nil)
	calls := 0
	err := p.WaitReady(time.Hour, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("WaitReady: %v after %d calls, want ready on the third", err, calls)
	}

	// A process that exits ends the wait, however long the timeout.
	gone := startSleep(t, "0")
	err = gone.WaitReady(time.Hour, time.Millisecond, func() error { return errors.New("never ready") })
	if !errors.Is(err, ErrExited) {
		t.Fatalf("WaitReady on an exited process: %v, want ErrExited", err)
	}
}
