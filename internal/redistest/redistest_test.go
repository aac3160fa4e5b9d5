package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pidGone reports whether no process has the pid any more.
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStartStallStop(t *testing.T) {
	Need(t)
	servers, err := StartN(2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if servers[0].Port == servers[1].Port {
		t.Fatalf("two servers on port %d", servers[0].Port)
	}
	for _, s := range servers {
		if err := s.ping(10 * time.Second); err != nil {
			t.Fatalf("%s: %v", s.Addr, err)
		}
		if pidGone(s.Pid) {
			t.Fatalf("pid %d of a running server does not exist", s.Pid)
		}
	}

	st, err := servers[0].Stall()
	if err != nil {
		t.Fatal(err)
	}
	// A PING sent during the stall is held: no answer while the process
	// is stopped, however long one waits, and the answer once released.
	held := sendPing(t, servers[0])
	expectHeld(t, held)
	if err := servers[1].ping(10 * time.Second); err != nil {
		t.Errorf("PING to the other server: %v", err)
	}
	if err := st.Release(); err != nil {
		t.Fatal(err)
	}
	expectPong(t, held)
	if err := st.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}

	if err := StopAll(servers); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if !s.Exited() || !pidGone(s.Pid) {
			t.Errorf("pid %d still exists after Stop", s.Pid)
		}
		if err := s.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	}
}

// sendPing sends PING to s on a connection of its own and returns the
// connection, closed when the test ends.
func sendPing(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(command("PING")); err != nil {
		t.Fatal(err)
	}
	return c
}

// expectHeld checks that no reply is readable on c: with the server
// stopped, a read can only end by its deadline, so the check does not
// depend on how long the deadline is.
func expectHeld(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [1]byte
	n, err := c.Read(b[:])
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a stalled server answered: read %d bytes, %v; want a timeout", n, err)
	}
}

// expectPong reads the reply to the PING sent on c.
func expectPong(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING held by a stall answered %q, %v; want +PONG", line, err)
	}
}

// Stalls nest: the server runs again when the last one is released.
func TestStallNests(t *testing.T) {
	s := Start(t, 1)[0]
	a, err := s.Stall()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Stall()
	if err != nil {
		t.Fatal(err)
	}
	held := sendPing(t, s)
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(); err != nil { // idempotent: does not release b
		t.Fatal(err)
	}
	expectHeld(t, held)
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	expectPong(t, held)
}

func TestStartRegistersCleanup(t *testing.T) {
	Need(t)
	var pid int
	t.Run("inner", func(t *testing.T) {
		s := Start(t, 1)[0]
		pid = s.Pid
	})
	if !pidGone(pid) {
		t.Fatalf("pid %d still exists after the test that started it ended", pid)
	}
}

func TestStopKillsAStuckServer(t *testing.T) {
	Need(t)
	// A process stopped by someone else cannot act on SIGTERM, so Stop
	// must escalate to SIGKILL after StopTimeout. (A Stall would not do:
	// Stop continues a server it stalled.)
	servers, err := StartN(1, Options{StopTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := servers[0]
	if err := syscall.Kill(s.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.waitStopped(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !pidGone(s.Pid) {
		t.Fatalf("pid %d still exists after Stop", s.Pid)
	}
	if s.proc.Err() == nil || !strings.Contains(s.proc.Err().Error(), "killed") {
		t.Errorf("exit status %v, want killed", s.proc.Err())
	}
}

// Stop ends a stall: the stalled server gets SIGTERM, is continued, and
// shuts down cleanly (the generous StopTimeout is a bound, not a
// measurement). A Release after Stop, and a Stall, fail softly.
func TestStopEndsAStall(t *testing.T) {
	Need(t)
	servers, err := StartN(1, Options{StopTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := servers[0]
	st, err := s.Stall()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.proc.Err() != nil {
		t.Errorf("exit status %v: the stalled server was killed, not shut down by SIGTERM", s.proc.Err())
	}
	if err := st.Release(); err != nil {
		t.Errorf("Release after Stop: %v, want nil", err)
	}
	if _, err := s.Stall(); err == nil {
		t.Errorf("Stall of a stopped server: no error")
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := StartN(1, Options{Binary: "/nonexistent/redis-server"})
	if !errors.Is(err, ErrMissing) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Fatalf("got %v, want ErrMissing and a message saying to apt-get install redis-server", err)
	}
	dir := t.TempDir()
	notExec := filepath.Join(dir, "redis-server")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{dir, notExec} {
		if _, err := StartN(1, Options{Binary: bin}); !errors.Is(err, ErrMissing) {
			t.Errorf("StartN with binary %s: %v, want ErrMissing", bin, err)
		}
	}
}

// fakeTB records what Need does with a test.
type fakeTB struct {
	fatal, skip string
	cleanups    int
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }
func (f *fakeTB) Skipf(format string, a ...any)  { f.skip = fmt.Sprintf(format, a...) }
func (f *fakeTB) Cleanup(func())                 { f.cleanups++ }

// A missing redis-server skips the test unless HEDGE_REQUIRE_DEPS asks
// for a failure; either way the message says how to install it.
func TestNeed(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "redis-server")
	present, err := os.Executable() // any executable file will do
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env      string
		binary   string
		wantOK   bool
		wantSkip bool
	}{
		{"", present, true, false},
		{"1", present, true, false},
		{"", missing, false, true},
		{"0", missing, false, true},
		{"false", missing, false, true},
		{"1", missing, false, false},
		{"true", missing, false, false},
		{"yes", missing, false, false}, // not a bool: errs on the side of failing
	} {
		t.Setenv(RequireDepsEnv, tc.env)
		var tb fakeTB
		ok := NeedBinary(&tb, tc.binary)
		name := fmt.Sprintf("%s=%q, binary %s", RequireDepsEnv, tc.env, tc.binary)
		switch {
		case ok != tc.wantOK:
			t.Errorf("%s: NeedBinary = %v, want %v", name, ok, tc.wantOK)
		case tc.wantOK && (tb.fatal != "" || tb.skip != ""):
			t.Errorf("%s: present binary, yet fatal %q, skip %q", name, tb.fatal, tb.skip)
		case !tc.wantOK && tc.wantSkip && (tb.skip == "" || tb.fatal != ""):
			t.Errorf("%s: skip %q, fatal %q; want a skip", name, tb.skip, tb.fatal)
		case !tc.wantOK && !tc.wantSkip && (tb.fatal == "" || tb.skip != ""):
			t.Errorf("%s: skip %q, fatal %q; want a failure", name, tb.skip, tb.fatal)
		}
		if msg := tb.fatal + tb.skip; !tc.wantOK && (!strings.Contains(msg, "apt-get install -y redis-server") || !strings.Contains(msg, RequireDepsEnv)) {
			t.Errorf("%s: message %q lacks the install hint or the name of %s", name, msg, RequireDepsEnv)
		}
	}
}

func TestCommand(t *testing.T) {
	got := string(command("DEBUG", "SLEEP", "0.5"))
	want := "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$3\r\n0.5\r\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
