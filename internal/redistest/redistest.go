// Package redistest starts and stops real redis-server processes for the
// tests and benchmarks of this module.
//
// Start launches N servers on free loopback ports, each with
//
//	--port P --bind 127.0.0.1 --save "" --appendonly no --enable-debug-command yes
//
// (no persistence, DEBUG allowed so that tests can stall a server with
// DEBUG SLEEP), waits until each answers PING, and stops them when the test
// ends. StartN does the same without a testing.TB, for tools such as a
// benchmark runner; the caller then stops the servers with Stop or StopAll.
// A server is stopped by its pid: SIGTERM, then SIGKILL if it has not exited
// after Options.StopTimeout, and the process is reaped, so its pid is gone
// when Stop returns.
//
// Server.Stall injects a stall: it sends DEBUG SLEEP on a connection of its
// own and returns once the server has stopped answering; Stall.Wait waits
// for the sleep to end. A stalled server still stops promptly on SIGTERM:
// with Redis 7.0.15 the signal cuts the sleep short (it is a nanosleep),
// the server answers DEBUG SLEEP and shuts down cleanly
// (TestStopEndsAStall).
//
// The binary is /usr/bin/redis-server (Redis 7 from Debian); when it is
// missing, the error says to run `apt-get install -y redis-server`.
//
// What it is not: a Redis client (it speaks just enough RESP for PING and
// DEBUG SLEEP), a cluster or replication harness (the servers are
// independent; tests seed the same data on each), or a mock.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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

	cmd         *exec.Cmd
	dir         string
	log         *tailBuffer
	exited      chan struct{} // closed once the process has exited and was reaped
	waitErr     error         // set before exited is closed
	stopTimeout time.Duration

	stopOnce sync.Once
	stopErr  error
}

// TB is the part of testing.TB that Start uses; *testing.T and *testing.B
// implement it. It keeps this package free of an import of testing.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Start starts n servers with the default Options, registers their Stop
// with tb.Cleanup, and fails the test (Fatalf) if any does not start.
func Start(tb TB, n int) []*Server {
	tb.Helper()
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
	if _, err := os.Stat(opt.Binary); err != nil {
		return nil, fmt.Errorf("redistest: %s is missing (%v): install it with `apt-get install -y redis-server`", opt.Binary, err)
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
	var errs []error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(opt, port)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the server binds it; startOne retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(opt Options, port int) (*Server, error) {
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
	cmd := exec.Command(opt.Binary, args...)
	log := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: starting %s: %w", opt.Binary, err)
	}
	s := &Server{
		Addr:        net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port:        port,
		Pid:         cmd.Process.Pid,
		cmd:         cmd,
		dir:         dir,
		log:         log,
		exited:      make(chan struct{}),
		stopTimeout: opt.StopTimeout,
	}
	// The only goroutine of a Server: it reaps the process and ends when
	// the process exits.
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(opt.StartTimeout); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls PING until the server answers, exits or time runs out.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.ping(200 * time.Millisecond)
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redistest: redis-server on port %d exited before answering PING (%v); its log:\n%s", s.Port, s.waitErr, s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on port %d did not answer PING within %v: %v; its log:\n%s", s.Port, timeout, err, s.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	select {
	case <-s.exited:
		return nil // already gone (it crashed, or was killed by someone else)
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			<-s.exited
			return nil
		}
		return fmt.Errorf("redistest: SIGTERM to pid %d: %w", s.Pid, err)
	}
	t := time.NewTimer(s.stopTimeout)
	defer t.Stop()
	select {
	case <-s.exited:
		return nil
	case <-t.C:
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: SIGKILL to pid %d: %w", s.Pid, err)
	}
	<-s.exited
	return nil
}

// Exited reports whether the process has exited and was reaped.
func (s *Server) Exited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

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

// Stall is a DEBUG SLEEP in progress on a server.
type Stall struct {
	conn net.Conn
	d    time.Duration
	once sync.Once
	err  error
}

// Stall makes the server sleep for d with DEBUG SLEEP, sent on a connection
// of its own, and returns once the server has stopped answering (a PING on
// another connection goes unanswered), so that commands sent after Stall
// returns wait for the sleep to end. The caller must call Wait.
func (s *Server) Stall(d time.Duration) (*Stall, error) {
	if d <= 0 {
		return nil, fmt.Errorf("redistest: Stall(%v): use a positive duration", d)
	}
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return nil, fmt.Errorf("redistest: stall: %w", err)
	}
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if _, err := c.Write(command("DEBUG", "SLEEP", secs)); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: stall: %w", err)
	}
	st := &Stall{conn: c, d: d}
	// Confirm the stall: probe with PING until one goes unanswered for a
	// while. A probe answered means the server has not read DEBUG SLEEP
	// yet. Probing stops after half the stall, so that the caller still
	// has a stalled server when Stall returns.
	probe := min(20*time.Millisecond, d/4)
	until := time.Now().Add(d / 2)
	for {
		err := s.ping(probe)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return st, nil
			}
			_ = st.Wait()
			return nil, fmt.Errorf("redistest: stall: probing: %w", err)
		}
		if time.Now().After(until) {
			_ = st.Wait()
			return nil, fmt.Errorf("redistest: stall: the server on port %d kept answering PING after DEBUG SLEEP %s (was it started with --enable-debug-command yes?)", s.Port, secs)
		}
		time.Sleep(time.Millisecond)
	}
}

// Wait blocks until the server has answered DEBUG SLEEP, that is until the
// stall is over, and closes the stall's connection. It is idempotent.
func (st *Stall) Wait() error {
	st.once.Do(func() {
		defer st.conn.Close()
		_ = st.conn.SetReadDeadline(time.Now().Add(st.d + 10*time.Second))
		line, err := bufio.NewReader(st.conn).ReadString('\n')
		switch {
		case err != nil:
			st.err = fmt.Errorf("redistest: waiting for DEBUG SLEEP to end: %w", err)
		case line != "+OK\r\n":
			st.err = fmt.Errorf("redistest: DEBUG SLEEP answered %q (was the server started with --enable-debug-command yes?)", strings.TrimSpace(line))
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

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
