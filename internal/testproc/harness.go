package testproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// TB is the part of testing.TB that the harnesses' Start and Need use;
// *testing.T and *testing.B implement it. It keeps the harnesses free of
// an import of testing.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
}

// RequireDepsEnv is the environment variable that turns a missing
// dependency (redis-server, PostgreSQL, prometheus) from a skipped test
// into a failed one. A developer without it sees the tests that need it
// skipped, with the command that installs it; CI sets
// HEDGE_REQUIRE_DEPS=1 so that a missing dependency cannot pass for a
// green run.
const RequireDepsEnv = "HEDGE_REQUIRE_DEPS"

// DepsRequired reports whether HEDGE_REQUIRE_DEPS asks for a missing
// dependency to fail the test: it does when set to anything but the empty
// string or a value strconv.ParseBool reads as false ("0", "false"), so
// that a misspelt value errs on the side of failing.
func DepsRequired() bool {
	v := os.Getenv(RequireDepsEnv)
	if v == "" {
		return false
	}
	on, err := strconv.ParseBool(v)
	return on || err != nil
}

// Need decides a test's fate from missing, the error of looking for a
// dependency (nil when it is there): it returns true when it is there;
// otherwise it skips the test, or fails it when DepsRequired, with
// missing's message (which should say how to install it), and returns
// false if tb lets it return.
func Need(tb TB, missing error) bool {
	tb.Helper()
	switch {
	case missing == nil:
		return true
	case DepsRequired():
		tb.Fatalf("%v (%s is set: a missing dependency fails the test)", missing, RequireDepsEnv)
	default:
		tb.Skipf("%v (skipped; set %s=1 to make this a failure)", missing, RequireDepsEnv)
	}
	return false
}

// FreePort asks the kernel for a free loopback port. Another process may
// take it before the server binds it: OnFreePort tries again then.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// OnFreePort calls launch with a free loopback port, up to tries times,
// each on a fresh port, until it succeeds: a port free when chosen may be
// taken before the server binds it. The error joins every attempt's.
func OnFreePort[T any](tries int, launch func(port int) (T, error)) (T, error) {
	var (
		zero T
		errs []error
	)
	for range tries {
		port, err := FreePort()
		if err != nil {
			return zero, err
		}
		v, err := launch(port)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	return zero, errors.Join(errs...)
}

// ErrExited is wrapped by WaitReady's error when the process exited
// before it was ready.
var ErrExited = errors.New("exited before it was ready")

// WaitReady calls ready every pause until it returns nil, the process
// exits (an error wrapping ErrExited, with how it ended) or timeout has
// passed (an error with ready's last). The timeout is a bound for a
// broken system, not a guess of how long a start takes.
func (p *Proc) WaitReady(timeout, pause time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w (%v)", ErrExited, p.err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %v", timeout, err)
		}
		time.Sleep(pause)
	}
}
