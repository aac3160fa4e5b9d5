// Package shardbench is the backend of "hedge bench fanout --shards": N
// shards of R replicas each, N x R real servers on loopback (HTTP or
// gRPC), run in a child process so that the CPU the client spends per
// request can be told apart from the servers'. Server s*R+r holds replica
// r of shard s (hedge.ShardGrid). Each server can be stalled (a
// bench.Gate blocks every request it receives), through a control server
// of the child process.
//
// The child process is the running executable itself, started with
// ServerEnv set: the program must call MaybeServe first thing (the hedge
// command does it from an init function, a test binary from TestMain).
// It exits when its standard input closes, so that it never outlives the
// bench, and is killed by the kernel if the bench dies (Pdeathsig).
//
// The requests go through hedge.DoFan, each leaf to a server of its
// shard, over plain connections (bench.LeafReader): the sharded fan-out
// is the root package's, not a transport's.
package shardbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/bench/grpcbench"
	"github.com/tailcut/hedge/internal/testproc"
)

// Kinds of servers.
const (
	KindHTTP = "http" // net/http servers, GET /item?k=N, HTTP/1.1
	KindGRPC = "grpc" // grpc-go servers, grpc.testing.TestService/UnaryCall
)

// MaxServers bounds Shards x Replicas.
const MaxServers = 300

// Options configures Start.
type Options struct {
	// Kind is KindHTTP or KindGRPC.
	Kind string
	// Shards and Replicas: Shards x Replicas servers, at most MaxServers.
	Shards, Replicas int
	// Exe is the program to run as the servers' process; empty means the
	// running executable. It must call MaybeServe first thing.
	Exe string
}

// Backend is N x R servers in a child process. It implements
// bench.Backend, bench.ServedCounter, bench.ProcessOwner and
// bench.LeafReader.
type Backend struct {
	kind             string
	shards, replicas int
	addrs            []string
	control          string
	ctl              *http.Client
	proc             *testproc.Proc
	stdin            io.WriteCloser
	stderr           *testproc.Tail
	once             sync.Once
	err              error
}

// ErrInvalid is matched by the errors of Start for options it refuses.
var ErrInvalid = errors.New("shardbench: invalid options")

// Start starts the servers' process and waits until every server
// listens.
func Start(o Options) (*Backend, error) {
	if o.Kind != KindHTTP && o.Kind != KindGRPC {
		return nil, fmt.Errorf("%w: kind %q: use %s or %s", ErrInvalid, o.Kind, KindHTTP, KindGRPC)
	}
	if o.Shards < 1 || o.Replicas < 1 || o.Shards*o.Replicas > MaxServers {
		return nil, fmt.Errorf("%w: %d shards x %d replicas: use at least one of each, and at most %d servers in all", ErrInvalid, o.Shards, o.Replicas, MaxServers)
	}
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("shardbench: finding the executable to run the servers: %w", err)
		}
	}
	n := o.Shards * o.Replicas
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", ServerEnv, o.Kind, n))
	cmd.SysProcAttr = testproc.SysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := &testproc.Tail{Max: 4096}
	cmd.Stderr = tail
	proc, err := testproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("shardbench: starting %s: %w", exe, err)
	}
	b := &Backend{kind: o.Kind, shards: o.Shards, replicas: o.Replicas, proc: proc, stdin: stdin, stderr: tail}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
	}
	var h hello
	if err := json.Unmarshal([]byte(line), &h); err != nil || len(h.Servers) != n {
		_ = b.Close()
		return nil, fmt.Errorf("shardbench: the servers' process (%s) did not start: %q; its output: %s (does the program call shardbench.MaybeServe first?)", exe, strings.TrimSpace(line), tail.String())
	}
	b.addrs, b.control = h.Servers, h.Control
	b.ctl = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	return b, nil
}

// Name returns the kind of servers, "http" or "grpc".
func (b *Backend) Name() string { return b.kind }

// Replicas returns the number of servers, Shards x Replicas.
func (b *Backend) Replicas() int { return len(b.addrs) }

// Shards returns the number of shards.
func (b *Backend) Shards() int { return b.shards }

// ReplicasPerShard returns the number of servers of each shard.
func (b *Backend) ReplicasPerShard() int { return b.replicas }

// Addrs returns the servers' addresses, by server index.
func (b *Backend) Addrs() []string { return append([]string(nil), b.addrs...) }

// Pids returns the servers' process.
func (b *Backend) Pids() []int { return []int{b.proc.Pid} }

// Stall makes server i answer nothing for d, and returns once it answers
// again.
func (b *Backend) Stall(ctx context.Context, i int, d time.Duration) error {
	u := fmt.Sprintf("http://%s/stall?server=%d&d=%s", b.control, i, url.QueryEscape(d.String()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := b.ctl.Do(req)
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("shardbench: stalling server %d: %s: %s", i, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// Served returns the requests each server received, or -1 for each if
// the count could not be read.
func (b *Backend) Served() []int64 {
	out := make([]int64, len(b.addrs))
	resp, err := b.ctl.Get("http://" + b.control + "/served")
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
	}
	if err != nil || len(out) != len(b.addrs) {
		out = make([]int64, len(b.addrs))
		for i := range out {
			out[i] = -1
		}
	}
	return out
}

// ErrNoClient is the error of NewClient: the servers are read only
// through fan-out calls.
var ErrNoClient = errors.New("shardbench: the sharded servers are read through hedge.DoFan only: use a sharded configuration (bench.ShardedContender)")

// NewClient returns ErrNoClient.
func (b *Backend) NewClient(hedge.Config) (bench.Client, error) { return nil, ErrNoClient }

// NewLeafReader reads a key from one server once, over connections of its
// own: HTTP/1.1 keep-alive, or one gRPC ClientConn per server
// (grpcbench.LeafReader).
func (b *Backend) NewLeafReader() (func(ctx context.Context, r, k int) error, func(), error) {
	if b.kind == KindHTTP {
		base, _ := bench.NewCountingTransport()
		urls := make([]string, len(b.addrs))
		for i, a := range b.addrs {
			urls[i] = "http://" + a + "/item?k="
		}
		read := func(ctx context.Context, r, k int) error {
			return bench.HTTPGet(ctx, base, urls[r]+strconv.Itoa(k))
		}
		return read, base.CloseIdleConnections, nil
	}
	return grpcbench.LeafReader(b.addrs)
}

// Close stops the servers' process (closing its standard input, then
// SIGTERM, then SIGKILL) and returns once it is gone. It is idempotent.
func (b *Backend) Close() error {
	b.once.Do(func() {
		if b.ctl != nil {
			b.ctl.CloseIdleConnections()
		}
		_ = b.stdin.Close()
		select {
		case <-b.proc.Done():
		case <-time.After(5 * time.Second):
			b.err = b.proc.Stop("shardbench", os.Interrupt, 5*time.Second, nil)
		}
	})
	return b.err
}

// ReplicaNames returns the servers' addresses, the names a sharded
// configuration gives them (hedge.Config.ReplicaNames).
func (b *Backend) ReplicaNames() []string { return b.Addrs() }
