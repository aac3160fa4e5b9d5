// Package pgbench is the PostgreSQL backend of hedge bench: a primary and
// hot standbys streaming from it (started and stopped by internal/pgtest,
// each a postgres child process on loopback), read through a
// hedgepgx.Client with point reads of a small table, and stalled by
// stopping a server's processes (SIGSTOP, then SIGCONT).
//
// # The workload
//
// Start creates the table kv (k int primary key, v text) on the primary,
// with bench.Keys rows of bench.ValueSize bytes, and waits until every
// standby has replayed it. Request i reads
//
//	SELECT v FROM kv WHERE k = $1
//
// with k = i mod bench.Keys, through hedgepgx.Client.QueryRow: the row is
// scanned inside each copy, and a losing copy's query is cancelled with a
// cancel request while its connection goes back to its pool
// (hedgepgx.KeepConnsOnCancel). Every server, the primary included,
// serves reads; nothing is written while the bench runs, so every server
// is always fresh enough and no read is redirected for lag.
//
// # Stalls
//
// A stall is pgtest's Cluster.Stall: SIGSTOP to the server's postmaster
// and to each of its client backends, SIGCONT when the stall is over. A
// query sent to a stalled server, a new connection to it and a cancel
// request for it all wait until it continues; replication goes on
// underneath. By default only the last standby stalls (StallOne): the
// case of one slow replica among healthy ones, which hedging is for. The
// runner replays a stall schedule for every replica; Stall refuses those
// of the replicas that do not stall with ErrNotStalled, so the report's
// stall counts are the stalls that happened (results.json counts the
// refused ones as stall errors). StallAll stalls every server on its own
// schedule, as the other backends do.
//
// # CPU accounting
//
// PostgreSQL serves each connection with a process of its own, a child of
// the postmaster. So that the runner counts the servers' CPU as the
// bench's own and not as other processes' (which would flag every run
// noisy), NewClient opens every connection of its pools before it
// returns, and Pids lists the postmasters and all their children alive at
// the call: the runner reads Pids right after making each run's client.
// A connection dialled later in the run (one lost to a stall longer than
// hedgepgx.CancelDeadline) is counted as another process's.
//
// It is its own package so that the core of package bench does not pull
// in pgx.
package pgbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgepgx"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/pgtest"
)

// ErrNotStalled is the error of Stall for a server that the backend's
// Options.Stall leaves running: the runner counts it as a stall error,
// not as a stall.
var ErrNotStalled = errors.New("pgbench: this server does not stall (Options.Stall is StallOne: only the last standby does)")

// The values of Options.Stall.
const (
	// StallOne stalls the last standby only; the other servers never
	// stall.
	StallOne = "one"
	// StallAll stalls every server, the primary included, each on its
	// own schedule.
	StallAll = "all"
)

// Stalls returns the values Options.Stall accepts, the default first.
func Stalls() []string { return []string{StallOne, StallAll} }

// Query is the read every request sends, with the key as $1.
const Query = "SELECT v FROM kv WHERE k = $1"

// DefaultPoolSize is the connections per server of a client when
// Options.PoolSize is zero.
const DefaultPoolSize = 16

// Options configures Start.
type Options struct {
	// Replicas is the number of servers: the primary and Replicas-1
	// standbys. Zero means 3.
	Replicas int
	// PoolSize is the connections each client opens to each server, all
	// of them before its first read (see "CPU accounting" in the package
	// doc). Zero means DefaultPoolSize. Every server accepts 200
	// connections, shared by the clients of a run (bench.Scenario.Clients)
	// and hedgepgx's position reads.
	PoolSize int
	// Stall says which servers stall: StallOne (the default when empty)
	// or StallAll.
	Stall string
	// BinDir holds PostgreSQL's binaries; empty means the newest
	// /usr/lib/postgresql/*/bin (see pgtest.Options.BinDir).
	BinDir string
}

// Backend is a running primary and its standbys holding the table kv.
// Its methods are safe for concurrent use.
type Backend struct {
	set      *pgtest.ReplicaSet
	servers  []*pgtest.Cluster // primary first
	pool     int
	stallAll bool

	once sync.Once
	err  error
}

// Start starts the primary and the standbys, fills kv on the primary and
// returns once every standby has replayed it. If PostgreSQL is missing,
// the error says which package to install (and matches
// pgtest.ErrMissing). Mistakes in o are reported before any server
// starts.
func Start(o Options) (*Backend, error) {
	n := o.Replicas
	if n == 0 {
		n = 3
	}
	var errs []error
	if n < 2 || n > 64 {
		errs = append(errs, fmt.Errorf("pgbench: %d servers: use 2 to 64 (the primary and at least one standby)", n))
	}
	if o.PoolSize < 0 || o.PoolSize > 64 {
		errs = append(errs, fmt.Errorf("pgbench: PoolSize %d: use 1 to 64 connections per server, or 0 for %d", o.PoolSize, DefaultPoolSize))
	}
	switch o.Stall {
	case "", StallOne, StallAll:
	default:
		errs = append(errs, fmt.Errorf("pgbench: Stall %q: use %s", o.Stall, strings.Join(Stalls(), " or ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	pool := o.PoolSize
	if pool == 0 {
		pool = DefaultPoolSize
	}
	set, err := pgtest.StartReplicaSet(pgtest.Options{BinDir: o.BinDir, StopTimeout: 5 * time.Second}, n-1)
	if err != nil {
		return nil, err
	}
	b := &Backend{set: set, servers: set.All(), pool: pool, stallAll: o.Stall == StallAll}
	if err := b.fill(); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return b, nil
}

// fill creates kv on the primary and waits for the standbys to replay it.
func (b *Backend) fill() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.set.Primary.DSN(""))
	if err != nil {
		return fmt.Errorf("pgbench: connecting to the primary: %w", err)
	}
	defer conn.Close(context.Background())
	value := strings.Repeat("v", bench.ValueSize)
	if _, err := conn.Exec(ctx, "CREATE TABLE kv (k int PRIMARY KEY, v text NOT NULL)"); err != nil {
		return fmt.Errorf("pgbench: creating kv: %w", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO kv SELECT g, $1 FROM generate_series(0, $2 - 1) AS g", value, bench.Keys); err != nil {
		return fmt.Errorf("pgbench: filling kv: %w", err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE kv"); err != nil {
		return fmt.Errorf("pgbench: vacuuming kv: %w", err)
	}
	if err := b.set.WaitCaughtUp(ctx); err != nil {
		return fmt.Errorf("pgbench: waiting for the standbys: %w", err)
	}
	return nil
}

// Name returns "postgres".
func (b *Backend) Name() string { return "postgres" }

// Replicas returns the number of servers, the primary included.
func (b *Backend) Replicas() int { return len(b.servers) }

// PoolSize returns the connections each client opens to each server.
func (b *Backend) PoolSize() int { return b.pool }

// Stalled reports whether server i stalls on its schedule.
func (b *Backend) Stalled(i int) bool { return b.stallAll || i == len(b.servers)-1 }

// Ports returns the servers' loopback ports, the primary's first.
func (b *Backend) Ports() []int {
	out := make([]int, len(b.servers))
	for i, s := range b.servers {
		out[i] = s.Port
	}
	return out
}

// Pids returns the process ids of the postmasters and of all their
// children alive now: client backends, WAL senders and receivers,
// background workers (see "CPU accounting" in the package doc).
func (b *Backend) Pids() []int {
	var out []int
	for _, s := range b.servers {
		out = append(out, s.Pid)
		out = append(out, childrenOf(s.Pid)...)
	}
	return out
}

// childrenOf returns the pids of the processes whose parent is ppid
// (Linux; nil elsewhere).
func childrenOf(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := strconv.Itoa(ppid)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(stat[i+1:])); len(f) >= 2 && f[1] == want {
			out = append(out, pid)
		}
	}
	return out
}

// Stall stops server i's postmaster and client backends (SIGSTOP) for d,
// then continues them, and returns once they run again. If ctx ends
// first, the server is continued at once and ctx's error returned. A
// server that Options.Stall leaves running is not touched: Stall returns
// ErrNotStalled at once.
func (b *Backend) Stall(ctx context.Context, i int, d time.Duration) error {
	if !b.Stalled(i) {
		return ErrNotStalled
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := b.servers[i].Stall()
	if err != nil {
		return fmt.Errorf("pgbench: stall of server %d: %w", i, err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var cerr error
	select {
	case <-t.C:
	case <-ctx.Done():
		cerr = ctx.Err()
	}
	if err := s.Release(); err != nil {
		return fmt.Errorf("pgbench: ending the stall of server %d: %w", i, err)
	}
	return cerr
}

// Close stops the servers (any stall is released first) and returns once
// their processes have exited. It is idempotent.
func (b *Backend) Close() error {
	b.once.Do(func() { b.err = b.set.Stop() })
	return b.err
}

// NewClient returns a client that reads kv through a hedgepgx.Client over
// one pool per server (the primary's first, as hedgepgx.Config.Primary
// 0), hedging as cfg says, with hedgepgx's defaults otherwise (positions
// read every 100 ms, no MaxLag). Each pool holds PoolSize connections, all
// opened before NewClient returns, and keeps them on cancel
// (hedgepgx.KeepConnsOnCancel, applied by hedgepgx.NewFromConfigs).
func (b *Backend) NewClient(cfg hedge.Config) (bench.Client, error) {
	configs := make([]*pgxpool.Config, len(b.servers))
	for i, s := range b.servers {
		pc, err := pgxpool.ParseConfig(s.DSN(""))
		if err != nil {
			return nil, fmt.Errorf("pgbench: pool config of server %d: %w", i, err)
		}
		pc.MaxConns = int32(b.pool)
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
		configs[i] = pc
	}
	c, err := hedgepgx.NewFromConfigs(configs, hedgepgx.Config{Hedge: cfg})
	if err != nil {
		return nil, err
	}
	if err := b.openAll(c); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	keys := make([]int32, bench.Keys)
	for k := range keys {
		keys[k] = int32(k)
	}
	return bench.ClientFuncs{
		DoFunc: func(ctx context.Context, i int) error {
			var v string
			if err := c.QueryRow(ctx, Query, keys[i%bench.Keys]).Scan(&v); err != nil {
				return err
			}
			if len(v) != bench.ValueSize {
				return fmt.Errorf("key %d: %d bytes, want %d", i%bench.Keys, len(v), bench.ValueSize)
			}
			return nil
		},
		StatsFunc: func() bench.ClientStats { return clientStats(c.Stats()) },
		CloseFunc: c.Close,
	}, nil
}

// openAll acquires PoolSize connections of every pool of c at once and
// then releases them all: as none is released before every one is
// acquired, each pool opens PoolSize connections, which stay idle in it.
func (b *Backend) openAll(c *hedgepgx.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []*pgxpool.Conn
		errs  []error
	)
	for i := range c.Len() {
		p := c.Pool(i)
		for range b.pool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := p.Acquire(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("pgbench: opening a connection to server %d: %w", i, err))
					return
				}
				conns = append(conns, conn)
			}()
		}
	}
	wg.Wait()
	for _, conn := range conns {
		conn.Release()
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// clientStats turns a hedgepgx snapshot into the bench's counters: the
// Hedger's of the query, pool waits (acquires that found no idle
// connection, and their wait), acquires cancelled while waiting (losers
// among them), and connections made
// (each pool's NewConnsCount, PoolSize per server from openAll included:
// the runner subtracts the counts at the start of the measured span).
func clientStats(st hedgepgx.Stats) bench.ClientStats {
	s := bench.HedgerStats(st.Op(Query))
	s.PoolWaits, s.PoolWaitTime, s.PoolTimeouts, s.Dials = 0, 0, 0, 0
	for _, srv := range st.Servers {
		s.PoolWaits += srv.Pool.EmptyAcquireCount()
		s.PoolWaitTime += srv.Pool.EmptyAcquireWaitTime()
		s.PoolTimeouts += srv.Pool.CanceledAcquireCount()
		s.Dials += srv.Pool.NewConnsCount()
	}
	return s
}
