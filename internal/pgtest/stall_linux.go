package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Stall is a cluster frozen by Cluster.Stall: its postmaster and client
// backends are stopped (SIGSTOP) until Release.
type Stall struct {
	c    *Cluster
	once sync.Once
	pids []int
	err  error
}

// Stall freezes the server as a long pause of the host would, for
// clients: SIGSTOP to the postmaster (new connections and cancel requests
// wait in the listen queue) and to every client backend (the queries they
// run, and the ones sent to them, wait). Background processes (the WAL
// receiver and the startup process of a standby, the checkpointer) go
// on, so that replication carries on underneath. Release sends SIGCONT to
// the same processes; Stop releases a stall still held. Linux only: the
// backends are found in /proc. Only one stall at a time per cluster.
func (c *Cluster) Stall() (*Stall, error) {
	c.stallMu.Lock()
	defer c.stallMu.Unlock()
	if c.stall != nil {
		return nil, errors.New("pgtest: the cluster is already stalled: Release the stall first")
	}
	s := &Stall{c: c}
	if err := syscall.Kill(c.Pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pgtest: SIGSTOP to postmaster %d: %w", c.Pid, err)
	}
	s.pids = append(s.pids, c.Pid)
	// With the postmaster stopped, no backend is forked until Release.
	backends, err := c.ClientBackends()
	for _, pid := range backends {
		if syscall.Kill(pid, syscall.SIGSTOP) == nil {
			s.pids = append(s.pids, pid)
		}
	}
	if err != nil {
		s.release()
		return nil, err
	}
	c.stall = s
	return s, nil
}

// Release continues the processes the stall stopped. It is idempotent and
// returns the first error of its first call.
func (s *Stall) Release() error {
	s.c.stallMu.Lock()
	defer s.c.stallMu.Unlock()
	if s.c.stall == s {
		s.c.stall = nil
	}
	return s.release()
}

func (s *Stall) release() error {
	s.once.Do(func() {
		var errs []error
		// Backends first, the postmaster last: a backend continued
		// before its postmaster is fine, and new connections wait for
		// the postmaster.
		for i := len(s.pids) - 1; i >= 0; i-- {
			if err := syscall.Kill(s.pids[i], syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("pgtest: SIGCONT to %d: %w", s.pids[i], err))
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// releaseStall continues a stalled cluster (for Stop: a stopped process
// must be continued for its signal to act).
func (c *Cluster) releaseStall() {
	c.stallMu.Lock()
	s := c.stall
	c.stall = nil
	c.stallMu.Unlock()
	if s != nil {
		_ = s.release()
	}
}

// ClientBackends returns the pids of the cluster's client backends: the
// postmaster's children whose process title names a client address
// ("postgres: user db 127.0.0.1(port) ..." or "[local]"), WAL senders
// excepted, and those just forked, which still have the postmaster's
// command line (a connection being set up). Linux only.
func (c *Cluster) ClientBackends() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("pgtest: listing backends: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == c.Pid {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(c.Pid) {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if isClientBackend(cmd) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// isClientBackend reports whether a child of the postmaster, by its
// command line, serves (or is about to serve) a client connection.
func isClientBackend(cmdline []byte) bool {
	if !bytes.HasPrefix(cmdline, []byte("postgres: ")) {
		return true // forked, not yet retitled
	}
	if bytes.Contains(cmdline, []byte("walsender")) {
		return false
	}
	return bytes.Contains(cmdline, []byte("127.0.0.1(")) || bytes.Contains(cmdline, []byte("[local]"))
}
