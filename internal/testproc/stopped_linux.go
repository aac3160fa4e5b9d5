package testproc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Stopped reports whether the process pid is stopped by a signal, from
// the state field of /proc/<pid>/stat ("T"; "t" is a tracing stop).
// Outside Linux it returns errors.ErrUnsupported.
func Stopped(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false, err
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses, so
	// the state follows the last ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, fmt.Errorf("/proc/%d/stat has no state field: %q", pid, b)
	}
	state := b[i+2]
	return state == 'T' || state == 't', nil
}

// WaitStopped returns once the process pid is stopped (after a SIGSTOP:
// the kernel stops it soon after, not at once), or an error: the process
// is gone, or it is still running after timeout, a bound for a broken
// system rather than a guess of how long a stop takes. Outside Linux it
// returns errors.ErrUnsupported.
func WaitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := Stopped(pid)
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d did not stop within %v", pid, timeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
