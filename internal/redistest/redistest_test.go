package redistest

import (
	"errors"
	"net"
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
	servers, err := StartN(2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if servers[0].Port == servers[1].Port {
		t.Fatalf("two servers on port %d", servers[0].Port)
	}
	for _, s := range servers {
		if err := s.ping(time.Second); err != nil {
			t.Fatalf("%s: %v", s.Addr, err)
		}
		if pidGone(s.Pid) {
			t.Fatalf("pid %d of a running server does not exist", s.Pid)
		}
	}

	st, err := servers[0].Stall(300 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The stalled server does not answer; the other one does.
	var ne net.Error
	if err := servers[0].ping(20 * time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("PING to a stalled server: got %v, want a timeout", err)
	}
	if err := servers[1].ping(time.Second); err != nil {
		t.Errorf("PING to the other server: %v", err)
	}
	if err := st.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := servers[0].ping(time.Second); err != nil {
		t.Errorf("PING after the stall: %v", err)
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

func TestStartRegistersCleanup(t *testing.T) {
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
	// A stopped process cannot act on SIGTERM (DEBUG SLEEP would not do:
	// the signal interrupts the sleep), so Stop must escalate to SIGKILL
	// after StopTimeout.
	servers, err := StartN(1, Options{StopTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := servers[0]
	if err := syscall.Kill(s.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !pidGone(s.Pid) {
		t.Fatalf("pid %d still exists after Stop", s.Pid)
	}
	if s.waitErr == nil || !strings.Contains(s.waitErr.Error(), "killed") {
		t.Errorf("exit status %v, want killed", s.waitErr)
	}
}

func TestStopEndsAStall(t *testing.T) {
	servers, err := StartN(1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := servers[0]
	st, err := s.Stall(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.waitErr != nil {
		t.Errorf("exit status %v: the stalled server was killed, not shut down by SIGTERM", s.waitErr)
	}
	if err := st.Wait(); err != nil {
		t.Errorf("DEBUG SLEEP cut short by SIGTERM: %v, want +OK", err)
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := StartN(1, Options{Binary: "/nonexistent/redis-server"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Fatalf("got %v, want a message saying to apt-get install redis-server", err)
	}
}

func TestCommand(t *testing.T) {
	got := string(command("DEBUG", "SLEEP", "0.5"))
	want := "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$3\r\n0.5\r\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
