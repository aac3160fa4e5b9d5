// Package testproc runs the child processes that the project's tests and
// benches start (redis-server, postgres, prometheus): each is reaped by a
// goroutine of its own, which ends when the process exits, and stopped by
// PID, politely and then for good. internal/redistest, internal/pgtest,
// internal/promtest and internal/etcdtest are built on it.
package testproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Proc is a started child process.
type Proc struct {
	// Pid is the process ID.
	Pid int

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and was reaped
	err  error         // cmd.Wait's result, set before done is closed
}

// Start starts cmd (set up by the caller: path, arguments, output,
// SysProcAttr) and reaps it on a goroutine of its own.
func Start(cmd *exec.Cmd) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited and was reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited and was reaped.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (cmd.Wait's error), once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the process with SIGKILL and waits until it was reaped.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop sends sig, calls signalled (if not nil: a stopped process must be
// continued for the signal to act), waits up to timeout for the process to
// exit, then sends SIGKILL. It returns once the process has exited and was
// reaped, so that Pid no longer exists; a process already gone is not an
// error. name prefixes its errors.
func (p *Proc) Stop(name string, sig os.Signal, timeout time.Duration, signalled func()) error {
	if p.Exited() {
		return nil // already gone (it crashed, or was killed by someone else)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			<-p.done
			return nil
		}
		return fmt.Errorf("%s: %v to pid %d: %w", name, sig, p.Pid, err)
	}
	if signalled != nil {
		signalled()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGKILL to pid %d: %w", name, p.Pid, err)
	}
	<-p.done
	return nil
}

// Tail is an io.Writer that keeps the last Max bytes written to it: a
// process's output, for the error that reports why it failed.
type Tail struct {
	Max int

	mu sync.Mutex
	b  []byte
}

// Write keeps the last Max bytes of everything written.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.Max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
