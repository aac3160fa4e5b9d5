// Package etcdtest starts real etcd servers on loopback for the tests and
// benchmarks of this module: one member, or a cluster of three, each a
// process of its own, stopped by its PID.
//
// The server is etcd's own main of the same release as the client in the
// main module's go.mod (see [Version]). It is built from the small module
// in etcdserver/ into a cache directory, once: scripts/etcd-server does
// it, and [Need] does it when the binary is missing. Debian's etcd-server
// is 3.4; a 3.7 client works against it for the basics, but a test must
// not pass against one server and fail against the one users run, so the
// tests run the release the client was built with.
//
// A [Cluster]'s members can be killed and restarted on the same data
// directory and ports ([Member.Kill], [Member.Restart]), stopped and
// continued with SIGSTOP and SIGCONT to cut them off without closing
// their sockets ([Member.Pause]), and the leader found ([Cluster.Leader])
// to kill it. The harness speaks etcd's JSON gateway (/health and
// /v3/maintenance/status) and needs no client of its own.
//
// Without the binary, and when it cannot be built, [Need] skips the test,
// or fails it when HEDGE_REQUIRE_DEPS=1 is set (as in CI).
package etcdtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge/internal/testproc"
)

// Version is the etcd release of the server this package runs. It is the
// release of go.etcd.io/etcd/server/v3 in etcdserver/go.mod and of
// go.etcd.io/etcd/client/v3 in the main module's go.mod
// (TestVersionsMatch keeps the three equal).
const Version = "v3.7.3"

// BinaryEnv names an etcd executable to run instead of the cached build.
const BinaryEnv = "HEDGE_ETCD_SERVER"

// ErrMissing is matched (errors.Is) by the error of [Binary] and [StartN],
// and the messages of [Need], when the etcd server is missing and could
// not be built.
var ErrMissing = errors.New("the etcd server is missing")

// TB is the part of testing.TB that Start and Need use.
type TB = testproc.TB

// CachePath is where scripts/etcd-server and [Build] put the server:
// $XDG_CACHE_HOME/hedge/etcd-VERSION/etcd (or ~/.cache/...).
func CachePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("etcdtest: no cache directory for the etcd server (set XDG_CACHE_HOME or %s): %w", BinaryEnv, err)
	}
	return filepath.Join(dir, "hedge", "etcd-"+Version, "etcd"), nil
}

// Binary returns the etcd executable: $HEDGE_ETCD_SERVER if set, else
// the cached build. Its error matches [ErrMissing] and says how to build it.
func Binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, checkBinary(p)
	}
	p, err := CachePath()
	if err != nil {
		return "", err
	}
	return p, checkBinary(p)
}

func checkBinary(p string) error {
	fi, err := os.Stat(p)
	if err == nil && (fi.IsDir() || fi.Mode().Perm()&0o111 == 0) {
		err = fmt.Errorf("%s is not an executable file", p)
	}
	if err != nil {
		return fmt.Errorf("etcdtest: %w at %s (%w): build it with `scripts/etcd-server`", ErrMissing, p, err)
	}
	return nil
}

var buildMu sync.Mutex

// Build builds the server into [CachePath] unless it is there, with the
// go command, from etcdserver/ next to this file. It needs the module
// proxy the first time. Builds by several test processes at once are
// safe: each writes a file of its own and renames it into place.
func Build() (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, err := Binary(); err == nil {
		return p, nil
	}
	if os.Getenv(BinaryEnv) != "" {
		return Binary()
	}
	dst, err := CachePath()
	if err != nil {
		return "", err
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("etcdtest: %w: cannot find etcdserver/ to build it; run `scripts/etcd-server`", ErrMissing)
	}
	src := filepath.Join(filepath.Dir(file), "etcdserver")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", dst, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("etcdtest: %w: building it in %s failed (%v): %s; run `scripts/etcd-server` to see why", ErrMissing, src, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	return dst, nil
}

// Need reports whether the etcd server is there, building it if it is
// missing. If it cannot be had, the test is skipped, or fails when
// HEDGE_REQUIRE_DEPS is set; the message says how to build it.
func Need(tb TB) bool {
	tb.Helper()
	_, err := Build()
	return testproc.Need(tb, err)
}

// Options configures [StartN]. The zero value is the default.
type Options struct {
	// Args are extra server flags for every member, such as
	// "--max-request-bytes=16777216".
	Args []string
	// StartTimeout bounds how long a cluster may take to become healthy.
	// Zero means a minute: a bound for a broken system, not a guess.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// Zero means 10 seconds.
	StopTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 10 * time.Second
	}
	return o
}

// Cluster is a set of etcd members on loopback, each a process.
type Cluster struct {
	// Members are the members, in the order of the initial cluster.
	Members []*Member

	opt Options
}

// Member is one etcd server process. Its methods are safe for concurrent
// use.
type Member struct {
	// Name is the member's name: m0, m1, m2.
	Name string
	// ClientURL is "http://127.0.0.1:PORT", for clientv3.Config.Endpoints.
	ClientURL string
	// PeerURL is the URL the members speak raft on.
	PeerURL string

	binary string
	args   []string
	dir    string
	opt    Options

	mu     sync.Mutex
	proc   *testproc.Proc
	log    *testproc.Tail
	paused int
}

// Start starts a cluster of n members (1 or 3, usually) and registers
// its Stop with tb.Cleanup. Without the server it skips or fails the test
// as Need does (and returns nil if tb lets it return); if the cluster does
// not start, it fails the test.
func Start(tb TB, n int) *Cluster {
	return StartOptions(tb, n, Options{})
}

// StartOptions is Start with Options.
func StartOptions(tb TB, n int, opt Options) *Cluster {
	tb.Helper()
	if !Need(tb) {
		return nil
	}
	c, err := StartN(n, opt)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Fatalf("%v", err)
		}
	})
	return c
}

// StartN starts a cluster of n members on free loopback ports and returns
// once every member reports itself healthy (a leader is elected). On error
// what was started is stopped. The caller stops the cluster with Stop.
func StartN(n int, opt Options) (*Cluster, error) {
	opt = opt.withDefaults()
	if n < 1 {
		return nil, fmt.Errorf("etcdtest: StartN(%d): start at least one member", n)
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range 3 {
		c, err := launch(bin, n, opt)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		// A port free when chosen may be taken before etcd binds it:
		// only that is worth another try.
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func launch(bin string, n int, opt Options) (*Cluster, error) {
	c := &Cluster{opt: opt}
	token := fmt.Sprintf("etcdtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	var initial []string
	for i := range n {
		cp, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		pp, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		m := &Member{
			Name:      "m" + strconv.Itoa(i),
			ClientURL: "http://127.0.0.1:" + strconv.Itoa(cp),
			PeerURL:   "http://127.0.0.1:" + strconv.Itoa(pp),
			binary:    bin,
			opt:       opt,
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		dir, err := os.MkdirTemp("", "etcdtest-")
		if err != nil {
			_ = c.Stop()
			return nil, fmt.Errorf("etcdtest: %w", err)
		}
		m.dir = dir
		m.args = append([]string{
			"--name", m.Name,
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--unsafe-no-fsync",
			"--log-level", "warn",
			// Clients may ping every second (the default refuses pings
			// under 5 s), so that a test's client notices a stopped
			// member in seconds.
			"--grpc-keepalive-min-time", "1s",
		}, opt.Args...)
		if err := m.start(); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	if err := c.WaitHealthy(opt.StartTimeout); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (m *Member) start() error {
	cmd := exec.Command(m.binary, m.args...)
	log := &testproc.Tail{Max: 16 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = testproc.SysProcAttr()
	p, err := testproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", m.binary, err)
	}
	m.mu.Lock()
	m.proc, m.log, m.paused = p, log, 0
	m.mu.Unlock()
	return nil
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	var e []string
	for _, m := range c.Members {
		e = append(e, m.ClientURL)
	}
	return e
}

// Stop stops every member (SIGTERM, then SIGKILL) and removes their data.
func (c *Cluster) Stop() error {
	var errs []error
	for _, m := range c.Members {
		errs = append(errs, m.Stop())
		if m.dir != "" {
			errs = append(errs, os.RemoveAll(m.dir))
		}
	}
	return errors.Join(errs...)
}

// WaitHealthy returns once every running member answers /health with a
// leader, or an error after timeout (a bound for a broken system).
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		if err := m.WaitHealthy(timeout); err != nil {
			return err
		}
	}
	return nil
}

// Pid is the member's process ID, or 0 when it is not running.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.Exited() {
		return 0
	}
	return m.proc.Pid
}

// Running reports whether the member's process is running (a paused
// member is running).
func (m *Member) Running() bool { return m.Pid() != 0 }

// Log is the end of the member's output.
func (m *Member) Log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log == nil {
		return ""
	}
	return m.log.String()
}

// WaitHealthy returns once the member answers /health with a leader.
func (m *Member) WaitHealthy(timeout time.Duration) error {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return fmt.Errorf("etcdtest: member %s was never started", m.Name)
	}
	err := p.WaitReady(timeout, 20*time.Millisecond, m.health)
	if err != nil {
		return fmt.Errorf("etcdtest: member %s (%s): %w; its log:\n%s", m.Name, m.ClientURL, err, m.Log())
	}
	return nil
}

// httpClient keeps no idle connections, so that no goroutine of it
// outlives a call (the tests check for leaks with goleak).
var httpClient = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

func (m *Member) health() error {
	resp, err := httpClient.Get(m.ClientURL + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("not healthy: %s", h.Reason)
	}
	return nil
}

// Status is what a member says of itself (etcd's maintenance status).
type Status struct {
	// ID is the member's ID, Leader its leader's (0 while there is none).
	ID, Leader uint64
	// Revision is the member's store revision.
	Revision int64
}

// Status asks the member for its status through the JSON gateway.
func (m *Member) Status() (Status, error) {
	resp, err := httpClient.Post(m.ClientURL+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return Status{}, fmt.Errorf("etcdtest: status of %s: %w", m.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var s struct {
		Header struct {
			MemberID string `json:"member_id"`
			Revision string `json:"revision"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.Unmarshal(body, &s); err != nil || resp.StatusCode != http.StatusOK {
		return Status{}, fmt.Errorf("etcdtest: status of %s: %s %s", m.Name, resp.Status, body)
	}
	var st Status
	st.ID, _ = strconv.ParseUint(s.Header.MemberID, 10, 64)
	st.Leader, _ = strconv.ParseUint(s.Leader, 10, 64)
	st.Revision, _ = strconv.ParseInt(s.Header.Revision, 10, 64)
	return st, nil
}

// Leader returns the member that the running, unpaused members agree
// leads, waiting up to timeout for them to agree.
func (c *Cluster) Leader(timeout time.Duration) (*Member, error) {
	deadline := time.Now().Add(timeout)
	for {
		lead, err := c.leader()
		if err == nil {
			return lead, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("etcdtest: no leader within %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) leader() (*Member, error) {
	ids := map[uint64]*Member{}
	var leader uint64
	for _, m := range c.Members {
		if !m.Running() || m.Paused() {
			continue
		}
		st, err := m.Status()
		if err != nil {
			return nil, err
		}
		ids[st.ID] = m
		if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return nil, fmt.Errorf("members disagree on the leader (%x, %x)", leader, st.Leader)
		}
		leader = st.Leader
	}
	if m, ok := ids[leader]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("the leader %x is not a running member", leader)
}

// Kill ends the member with SIGKILL (no clean shutdown) and returns once
// it was reaped. Its data directory stays, for Restart.
func (m *Member) Kill() {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Stop ends the member with SIGTERM (continuing it if paused), then
// SIGKILL after Options.StopTimeout, and returns once it was reaped.
func (m *Member) Stop() error {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop("etcdtest: member "+m.Name, stopSignal, m.opt.StopTimeout, func() { _ = p.Signal(contSignal) })
}

// Restart starts a member that was killed or stopped again, on its data
// directory and ports, and returns once it is healthy.
func (m *Member) Restart() error {
	if m.Running() {
		return fmt.Errorf("etcdtest: Restart: member %s is running; Kill or Stop it first", m.Name)
	}
	if err := m.start(); err != nil {
		return err
	}
	return m.WaitHealthy(m.opt.StartTimeout)
}

// Paused reports whether the member is paused.
func (m *Member) Paused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused > 0
}

// Pause stops the member's process (SIGSTOP) and returns once the kernel
// reports it stopped: its sockets stay open and answer nothing, as behind
// a partition, until Resume (SIGCONT).
func (m *Member) Pause() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil || m.proc.Exited() {
		return fmt.Errorf("etcdtest: Pause: member %s is not running", m.Name)
	}
	if err := m.proc.Signal(pauseSignal); err != nil {
		return fmt.Errorf("etcdtest: Pause: member %s: %w", m.Name, err)
	}
	m.paused++
	if err := testproc.WaitStopped(m.proc.Pid, 10*time.Second); err != nil {
		return fmt.Errorf("etcdtest: Pause: member %s: %w", m.Name, err)
	}
	return nil
}

// Resume continues a paused member (SIGCONT).
func (m *Member) Resume() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.paused == 0 {
		return nil
	}
	m.paused = 0
	if err := m.proc.Signal(contSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("etcdtest: Resume: member %s: %w", m.Name, err)
	}
	return nil
}

// Addr is the host:port of the member's client URL.
func (m *Member) Addr() string {
	return strings.TrimPrefix(m.ClientURL, "http://")
}
