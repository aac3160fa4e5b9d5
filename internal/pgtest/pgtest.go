// Package pgtest starts and stops throwaway PostgreSQL clusters for the
// tests and benchmarks of this module. It never touches a system cluster:
// each cluster lives in a temporary directory of its own, made by initdb,
// served by a postgres process on a free loopback port (its Unix socket
// in the same directory), and removed when it stops.
//
// The binaries are found under /usr/lib/postgresql/*/bin (Debian's
// postgresql package; the newest version wins), or in Options.BinDir.
// When they are missing, the error says to run
// `apt-get install -y postgresql`, and Need decides, by testproc.Need as
// for every dependency of the tests, whether the test skips or fails
// (HEDGE_REQUIRE_DEPS=1, as in CI).
//
// Root: postgres refuses to run as root. When the process runs as root,
// initdb and postgres run as the unprivileged user "nobody" (through
// SysProcAttr.Credential), and the cluster's directory is made and
// chowned for it under os.TempDir (not t.TempDir, whose parents are
// private to root). As any other user they run as that user.
//
// The cluster is tuned for tests, not durability: fsync, synchronous
// commit and full-page writes are off, and every local connection is
// trusted (initdb --auth=trust) for the superuser "postgres". A cluster is
// stopped by its pid: SIGINT (a fast shutdown), then SIGKILL after
// Options.StopTimeout; on Linux the postmaster also dies with the process
// that started it.
//
// Replication: StartReplicaSet (StartReplicated in a test) starts a
// primary and hot standbys that follow it by streaming replication, each
// a Cluster of its own on loopback, made by pg_basebackup -R. A standby's
// replay can be paused and resumed (PauseReplay, ResumeReplay), and any
// cluster can be frozen for clients (Stall: SIGSTOP to the postmaster and
// the client backends, Linux only) while replication goes on underneath.
// Crash ends a cluster as pg_ctl stop -m immediate does, and Restart
// starts it again on the same data directory and port, with extra
// settings if asked: a standby restarted with recovery_min_apply_delay
// serves reads from its consistency point, behind where it had replayed
// before the crash.
//
// What it is not: a PostgreSQL client (tests bring pgx), or a way to run
// a production database.
package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge/internal/testproc"
)

// ErrMissing is matched (errors.Is) by the error of StartCluster, and the
// messages of Need, when initdb is not installed.
var ErrMissing = errors.New("PostgreSQL (initdb) is missing")

// Options configures StartCluster. The zero value finds the binaries and
// uses the default timeouts.
type Options struct {
	// BinDir holds initdb, postgres and pg_isready. Empty means the
	// newest /usr/lib/postgresql/*/bin.
	BinDir string
	// Args are extra "-c name=value" settings for postgres, such as
	// "max_connections=50".
	Args []string
	// StartTimeout bounds initdb plus the server becoming ready. Zero
	// means one minute.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGINT before SIGKILL.
	// Zero means 10 seconds.
	StopTimeout time.Duration
}

// Cluster is one running throwaway PostgreSQL cluster. Its methods are
// safe for concurrent use.
type Cluster struct {
	// Dir is the temporary directory holding the data directory and the
	// socket; it is removed by Stop.
	Dir string
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Pid is the postmaster's process id.
	Pid int
	// User is the superuser to connect as ("postgres").
	User string

	proc        *testproc.Proc
	log         *os.File
	stopTimeout time.Duration
	opt         Options // as started, for Restart
	data        string  // the data directory
	cred        *runAs

	stopOnce sync.Once
	stopErr  error

	stallMu sync.Mutex
	stall   *Stall // held by Stall, until Release or Stop
}

// DSN returns a connection string for database db ("postgres" when
// empty), for pgx and libpq: host, port, user, dbname, sslmode=disable.
func (c *Cluster) DSN(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", c.Port, c.User, db)
}

// URL returns the connection string of DSN as a postgres:// URL.
func (c *Cluster) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", c.User, c.Port, db)
}

// FindBinDir returns the newest /usr/lib/postgresql/*/bin that holds
// initdb, or an error matching ErrMissing.
func FindBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: %w: no /usr/lib/postgresql/*/bin/initdb: install it with `apt-get install -y postgresql`", ErrMissing)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// Need reports whether PostgreSQL is installed. If it is not, the test is
// skipped, or fails when testproc.DepsRequired (HEDGE_REQUIRE_DEPS=1);
// either way the message says how to install it. With a *testing.T or
// *testing.B it returns only when PostgreSQL is there.
func Need(tb testproc.TB) bool {
	tb.Helper()
	_, err := FindBinDir()
	return testproc.Need(tb, err)
}

// Start starts a cluster with the default Options and registers its Stop
// with tb.Cleanup. Without PostgreSQL it skips or fails as Need does; if
// the cluster does not start, it fails the test.
func Start(tb testproc.TB) *Cluster {
	tb.Helper()
	if !Need(tb) {
		return nil
	}
	c, err := StartCluster(Options{})
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Fatalf("%v", err)
		}
	})
	return c
}

// StartCluster runs initdb in a new temporary directory and starts
// postgres on a free loopback port, returning once it accepts
// connections. The caller must Stop it.
func StartCluster(opt Options) (*Cluster, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	return startWith(opt, func(dir, data string, cred *runAs) error {
		initdb := exec.Command(filepath.Join(opt.BinDir, "initdb"),
			"-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
		initdb.Dir = dir
		initdb.SysProcAttr = sysProcAttr(cred)
		if out, err := initdb.CombinedOutput(); err != nil {
			return fmt.Errorf("pgtest: initdb: %w; its output:\n%s", err, out)
		}
		return nil
	})
}

// withDefaults returns opt with its zero fields set to their defaults.
func (opt Options) withDefaults() (Options, error) {
	if opt.BinDir == "" {
		d, err := FindBinDir()
		if err != nil {
			return opt, err
		}
		opt.BinDir = d
	}
	if opt.StartTimeout == 0 {
		opt.StartTimeout = time.Minute
	}
	if opt.StopTimeout == 0 {
		opt.StopTimeout = 10 * time.Second
	}
	return opt, nil
}

// startWith makes a temporary directory for the postgres user, fills its
// data directory with makeData (initdb, or a base backup), and starts
// postgres on it, trying a few free ports. opt's defaults are set.
func startWith(opt Options, makeData func(dir, data string, cred *runAs) error) (*Cluster, error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.uid), int(cred.gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: giving %s to the postgres user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := makeData(dir, data, cred); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c, err := testproc.OnFreePort(5, func(port int) (*Cluster, error) { return launch(opt, dir, data, port, cred) })
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func launch(opt Options, dir, data string, port int, cred *runAs) (*Cluster, error) {
	args := postgresArgs(dir, data, port, opt.Args)
	logf, err := os.CreateTemp("", "pgtest-log-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	os.Remove(logf.Name()) // kept open, read back through the file
	cmd := exec.Command(filepath.Join(opt.BinDir, "postgres"), args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr(cred)
	proc, err := testproc.Start(cmd)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	c := &Cluster{
		Dir: dir, Port: port, Pid: proc.Pid, User: "postgres",
		proc: proc, log: logf, stopTimeout: opt.StopTimeout,
		opt: opt, data: data, cred: cred,
	}
	if err := c.waitReady(filepath.Join(opt.BinDir, "pg_isready"), opt.StartTimeout); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// postgresArgs returns the arguments of postgres for the data directory
// data in dir on port: the test settings, then extra ("name=value").
func postgresArgs(dir, data string, port int, extra []string) []string {
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200",
	}
	for _, a := range extra {
		args = append(args, "-c", a)
	}
	return args
}

// Crash ends the server as a crash would: SIGQUIT to the postmaster, what
// pg_ctl stop -m immediate sends. Every process of the server exits at
// once, without a shutdown checkpoint, and client connections break. The
// data directory stays, so that Restart can start the server again, which
// then runs crash recovery (a standby replays again from its last
// restartpoint). Crash returns once the postmaster has exited and was
// reaped. It must not run concurrently with the Cluster's other methods.
func (c *Cluster) Crash() error {
	c.releaseStall()
	return c.proc.Stop("pgtest", immediateShutdown, c.stopTimeout, c.releaseStall)
}

// Restart starts postgres again on the cluster's data directory and
// port, after Crash, with the settings it first started with followed by
// args ("name=value", such as "recovery_min_apply_delay=1h"), and
// returns once it accepts connections. Pid is then the new postmaster's.
// It must not run concurrently with the Cluster's other methods.
func (c *Cluster) Restart(args ...string) error {
	if !c.proc.Exited() {
		return fmt.Errorf("pgtest: the server on port %d is running: Crash it before Restart", c.Port)
	}
	cmd := exec.Command(filepath.Join(c.opt.BinDir, "postgres"), postgresArgs(c.Dir, c.data, c.Port, append(slices.Clone(c.opt.Args), args...))...)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.SysProcAttr = sysProcAttr(c.cred)
	proc, err := testproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("pgtest: restarting postgres on port %d: %w", c.Port, err)
	}
	c.proc, c.Pid = proc, proc.Pid
	return c.waitReady(filepath.Join(c.opt.BinDir, "pg_isready"), c.opt.StartTimeout)
}

// waitReady polls pg_isready until the server accepts connections, exits,
// or time runs out.
func (c *Cluster) waitReady(isready string, timeout time.Duration) error {
	err := c.proc.WaitReady(timeout, 20*time.Millisecond, func() error {
		return exec.Command(isready, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", c.User, "-t", "2").Run()
	})
	if err != nil {
		return fmt.Errorf("pgtest: postgres on port %d did not accept connections: %w; its log:\n%s", c.Port, err, c.Log())
	}
	return nil
}

// Log returns the tail (last 8 KiB) of the server's log.
func (c *Cluster) Log() string {
	fi, err := c.log.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(fi.Size()-8<<10, 0)
	b := make([]byte, fi.Size()-off)
	n, _ := c.log.ReadAt(b, off)
	return strings.TrimSpace(string(b[:n]))
}

// kill ends a postmaster that failed to start, without removing the
// directory (initdb's work is reused by the next attempt).
func (c *Cluster) kill() {
	c.proc.Kill()
	c.log.Close()
}

// Stop stops the cluster: SIGINT (fast shutdown: sessions are ended), then
// SIGKILL after the stop timeout; it returns once the postmaster has
// exited and was reaped, and removes the directory. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	defer os.RemoveAll(c.Dir)
	defer c.log.Close()
	return c.proc.Stop("pgtest", os.Interrupt, c.stopTimeout, c.releaseStall)
}

// Exited reports whether the postmaster has exited and was reaped.
func (c *Cluster) Exited() bool { return c.proc.Exited() }
