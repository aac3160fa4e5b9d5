// Package redistest starts and stops real redis-server processes for the
// tests and benchmarks of this module.
//
// Start launches N servers on free loopback ports, each with
//
//	--port P --bind 127.0.0.1 --save "" --appendonly no --enable-debug-command yes
//
// (no persistence; DEBUG allowed, see below), waits until each answers
// PING, and stops them when the test ends. StartN does the same without a
// testing.TB, for tools such as a benchmark runner; the caller then stops
// the servers with Stop or StopAll. A server is stopped by its pid:
// SIGTERM, then SIGKILL if it has not exited after Options.StopTimeout, and
// the process is reaped, so its pid is gone when Stop returns.
//
// Server.Stall stalls a server until the test releases it: it stops the
// process with SIGSTOP and returns once the kernel reports it stopped, so
// that every command sent afterwards waits (connections are still
// accepted by the kernel, and commands queue in socket buffers) until
// Stall.Release sends SIGCONT. Nothing about it depends on a clock: a
// test decides when the stall ends, after whatever events it waits for.
// Stall nests: the server runs again once every Stall was released. Stop
// ends a stall: the server gets SIGTERM, then SIGCONT, and shuts down
// cleanly (TestStopEndsAStall). The servers are also started with DEBUG
// enabled, for tools that stall a server for a set time with DEBUG SLEEP
// (package internal/bench/redisbench).
//
// The binary is /usr/bin/redis-server (Redis 7 from Debian); when it is
// missing, the error says to run `apt-get install -y redis-server`. Need
// decides, in one place for every test of the module, what a test does
// then: skip, or fail when HEDGE_REQUIRE_DEPS=1 is set (as in CI). Start
// calls it.
//
// StartCluster and StartClusterN start a Redis Cluster: masters with
// replicas, created by redis-cli --cluster create, and return once every
// node agrees on the layout and every replica is in sync (see Cluster).
//
// What it is not: a Redis client (it speaks just enough RESP for PING and
// the cluster's own commands), a replication harness (StartN's servers are
// independent; tests seed the same data on each, or make replicas with
// REPLICAOF), or a mock.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tailcut/hedge/internal/testproc"
)

// DefaultBinary is the redis-server used when Options.Binary is empty.
const DefaultBinary = "/usr/bin/redis-server"

// Options configures StartN. The zero value starts DefaultBinary with the
// default timeouts.
type Options struct {
	// Binary is the redis-server executable. Empty means DefaultBinary.
	Binary string
	// Args are extra arguments appended to the command line, such as
	// "--maxclients", "100".
	Args []string
	// StartTimeout bounds how long a server may take to answer PING.
	// Zero means 10 seconds.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before sending
	// SIGKILL. Zero means 5 seconds.
	StopTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Binary == "" {
		o.Binary = DefaultBinary
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 10 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 5 * time.Second
	}
	return o
}

// Server is one running redis-server process. Its methods are safe for
// concurrent use.
type Server struct {
	// Addr is "127.0.0.1:Port", ready for redis.Options.Addr.
	Addr string
	// Port is the TCP port the server listens on.
	Port int
	// Pid is the process id.
	Pid int

	proc        *testproc.Proc
	dir         string
	log         *testproc.Tail
	stopTimeout time.Duration

	stopOnce sync.Once
	stopErr  error

	// stallMu guards stalls (how many Stalls are not yet released) and
	// stopping (Stop has begun: no new Stall).
	stallMu  sync.Mutex
	stalls   int
	stopping bool
}

// TB is the part of testing.TB that Start and Need use; *testing.T and
// *testing.B implement it.
type TB = testproc.TB

// RequireDepsEnv is the environment variable that turns a missing
// redis-server from a skipped test into a failed one (testproc.RequireDepsEnv).
const RequireDepsEnv = testproc.RequireDepsEnv

// ErrMissing is matched (errors.Is) by the error of StartN, and the
// messages of Need, when the redis-server executable is missing.
var ErrMissing = errors.New("redis-server is missing")

// DepsRequired reports whether HEDGE_REQUIRE_DEPS asks for a missing
// dependency to fail the test: it does when set to anything but the empty
// string or a value strconv.ParseBool reads as false ("0", "false"), so
// that a misspelt value errs on the side of failing.
func DepsRequired() bool { return testproc.DepsRequired() }

// Need reports whether DefaultBinary is installed. If it is not, the test
// is skipped, or fails when DepsRequired; either way the message says how
// to install it. It is the one place where the module's tests decide
// this. With a *testing.T or *testing.B, Need returns only when the
// binary is there (Skipf and Fatalf end the test).
func Need(tb TB) bool {
	tb.Helper()
	return NeedBinary(tb, DefaultBinary)
}

// NeedBinary is Need for the redis-server executable at binary.
func NeedBinary(tb TB, binary string) bool {
	tb.Helper()
	return testproc.Need(tb, checkBinary(binary))
}

// checkBinary returns an error matching ErrMissing, with the command that
// installs redis-server, unless binary is an executable file.
func checkBinary(binary string) error {
	fi, err := os.Stat(binary)
	if err == nil && (fi.IsDir() || fi.Mode().Perm()&0o111 == 0) {
		err = fmt.Errorf("%s is not an executable file", binary)
	}
	if err != nil {
		return fmt.Errorf("redistest: %w at %s (%w): install it with `apt-get install -y redis-server`", ErrMissing, binary, err)
	}
	return nil
}

// Start starts n servers with the default Options and registers their Stop
// with tb.Cleanup. Without redis-server it skips or fails the test as Need
// does (and returns nil if tb lets it return); if a server does not
// start, it fails the test (Fatalf).
func Start(tb TB, n int) []*Server {
	tb.Helper()
	if !Need(tb) {
		return nil
	}
	servers, err := StartN(n, Options{})
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := StopAll(servers); err != nil {
			tb.Fatalf("%v", err)
		}
	})
	return servers
}

// StartN starts n servers on free loopback ports and returns once every one
// answers PING. On error the servers already started are stopped. The
// caller must stop the servers (StopAll).
func StartN(n int, opt Options) ([]*Server, error) {
	opt = opt.withDefaults()
	if n < 1 {
		return nil, fmt.Errorf("redistest: StartN(%d): start at least one server", n)
	}
	if err := checkBinary(opt.Binary); err != nil {
		return nil, err
	}
	servers := make([]*Server, 0, n)
	for range n {
		s, err := startOne(opt)
		if err != nil {
			_ = StopAll(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// startOne starts one server, retrying on a fresh port if the one chosen
// was taken between choosing it and the server binding it.
func startOne(opt Options) (*Server, error) {
	return testproc.OnFreePort(5, func(port int) (*Server, error) { return launch(opt, port, nil) })
}

// launch starts a server on port with opt's arguments, then extra's.
func launch(opt Options, port int, extra func(dir string) []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--enable-debug-command", "yes",
		"--dir", dir,
		"--loglevel", "warning",
	}
	args = append(args, opt.Args...)
	if extra != nil {
		args = append(args, extra(dir)...)
	}
	cmd := exec.Command(opt.Binary, args...)
	log := &testproc.Tail{Max: 8 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = testproc.SysProcAttr()
	proc, err := testproc.Start(cmd)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: starting %s: %w", opt.Binary, err)
	}
	s := &Server{
		Addr:        net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port:        port,
		Pid:         proc.Pid,
		proc:        proc,
		dir:         dir,
		log:         log,
		stopTimeout: opt.StopTimeout,
	}
	if err := s.waitReady(opt.StartTimeout); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls PING until the server answers, exits or time runs out.
func (s *Server) waitReady(timeout time.Duration) error {
	err := s.proc.WaitReady(timeout, 5*time.Millisecond, func() error { return s.ping(200 * time.Millisecond) })
	if err != nil {
		return fmt.Errorf("redistest: redis-server on port %d did not answer PING: %w; its log:\n%s", s.Port, err, s.log.String())
	}
	return nil
}

// ping sends PING on a fresh connection and expects +PONG.
func (s *Server) ping(timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", s.Addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(command("PING")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop stops the server: SIGTERM, then SIGKILL if it has not exited after
// the stop timeout. It returns once the process has exited and was reaped,
// so Pid no longer exists. It is idempotent; later calls return the first
// call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	defer os.RemoveAll(s.dir)
	s.stallMu.Lock()
	s.stopping = true
	stalled := s.stalls > 0
	s.stallMu.Unlock()
	return s.proc.Stop("redistest", syscall.SIGTERM, s.stopTimeout, func() {
		if stalled {
			// The SIGTERM waits, pending, until the process runs again.
			_ = s.proc.Signal(contSignal)
		}
	})
}

// Exited reports whether the process has exited and was reaped.
func (s *Server) Exited() bool { return s.proc.Exited() }

// Log returns the tail of the server's output (its log at level warning).
func (s *Server) Log() string { return s.log.String() }

// StopAll stops every server, concurrently, and joins their errors.
func StopAll(servers []*Server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Stop()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stall is a stall of a server made by Server.Stall, in force until
// Release.
type Stall struct {
	s    *Server
	once sync.Once
	err  error
}

// Stall stops the server process (SIGSTOP) and returns once it is
// stopped: from then on the server answers nothing, and every command sent
// to it waits, until Release (or Stop). On Linux "stopped" is the state
// the kernel reports in /proc; elsewhere, a PING that goes unanswered for
// 20 ms after the signal was sent. Stalls nest: with several in force, the
// server runs again when the last is released. The caller must call
// Release.
func (s *Server) Stall() (*Stall, error) {
	if stopSignal == nil {
		return nil, fmt.Errorf("redistest: Stall: stopping a process is not supported on %s", runtime.GOOS)
	}
	s.stallMu.Lock()
	defer s.stallMu.Unlock()
	if s.stopping || s.Exited() {
		return nil, fmt.Errorf("redistest: Stall: the server on port %d is stopped", s.Port)
	}
	if s.stalls == 0 {
		if err := s.proc.Signal(stopSignal); err != nil {
			return nil, fmt.Errorf("redistest: Stall: SIGSTOP to pid %d: %w", s.Pid, err)
		}
		if err := s.waitStopped(10 * time.Second); err != nil {
			_ = s.proc.Signal(contSignal)
			return nil, err
		}
	}
	s.stalls++
	return &Stall{s: s}, nil
}

// waitStopped returns once the process is stopped, or an error after
// timeout (a bound for a broken system, not a guess of how long it takes).
func (s *Server) waitStopped(timeout time.Duration) error {
	err := testproc.WaitStopped(s.Pid, timeout)
	if errors.Is(err, errors.ErrUnsupported) {
		// No /proc to read: a stopped server does not answer a ping.
		deadline := time.Now().Add(timeout)
		for s.ping(20*time.Millisecond) == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("redistest: Stall: the server on port %d still answers %v after SIGSTOP", s.Port, timeout)
			}
		}
		return nil
	}
	if err != nil && s.Exited() {
		return fmt.Errorf("redistest: Stall: the server on port %d exited (%v); its log:\n%s", s.Port, s.proc.Err(), s.log.String())
	}
	if err != nil {
		return fmt.Errorf("redistest: Stall: %w", err)
	}
	return nil
}

// Release ends the stall: when no other Stall of the server is in force,
// the process continues (SIGCONT) and answers the commands that waited. It
// is idempotent, and returns nil once the server was stopped.
func (st *Stall) Release() error {
	st.once.Do(func() {
		s := st.s
		s.stallMu.Lock()
		defer s.stallMu.Unlock()
		s.stalls--
		if s.stalls > 0 {
			return
		}
		if err := s.proc.Signal(contSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
			st.err = fmt.Errorf("redistest: Release: SIGCONT to pid %d: %w", s.Pid, err)
		}
	})
	return st.err
}

// command encodes a command as a RESP array of bulk strings.
func command(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}
