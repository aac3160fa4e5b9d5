// Package redisbench is the Redis backend of hedge bench: real
// redis-server processes on loopback (started and stopped by
// internal/redistest), stalled with DEBUG SLEEP, read through a
// hedgeredis.Client or a hedgerueidis.Client (Options.Client).
//
// Two clients, because the two Redis adapters pay for hedging in different
// places, and the bench must show each as it is. hedgeredis wraps go-redis,
// which does not stop a command once it holds a connection: every copy,
// the primary included, runs on a goroutine of its own, so that a loser
// cannot hold the caller, and that hand-off is paid on every read, hedged
// or not. hedgerueidis wraps rueidis, which returns as soon as a copy's
// context ends (its pipeline reads and drops the late reply): the primary
// runs on the caller's goroutine, and a read that is not hedged starts no
// goroutine. Measuring both over the same servers, stalls and schedule
// tells that per-read cost apart from what hedging itself costs.
//
// A stall is DEBUG SLEEP sent on a connection kept for the purpose: the
// server runs commands on one thread, so while it sleeps it answers nobody,
// exactly like a process paused. DEBUG SLEEP is used rather than CLIENT
// PAUSE, which Redis lifts from its 10 Hz cron and so overshoots by up to
// 100 ms. The stall is over when the server answers the DEBUG SLEEP.
//
// It is its own package so that the core of package bench, which the peer
// comparison module imports, does not pull in go-redis or rueidis.
package redisbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeredis"
	"github.com/tailcut/hedge/internal/bench"
	"github.com/tailcut/hedge/internal/redistest"
)

// Options configures Start.
type Options struct {
	// Replicas is the number of servers. Zero means 3.
	Replicas int
	// Binary is the redis-server executable; empty means
	// /usr/bin/redis-server.
	Binary string
	// PoolSize is each replica's go-redis pool size; zero means go-redis's
	// default (10 per GOMAXPROCS). It applies to go-redis only: rueidis
	// has no equivalent (see ClientRueidis), and Start refuses a non-zero
	// PoolSize with it.
	PoolSize int
	// Client is the Redis client reads go through: ClientGoRedis (the
	// default when empty) or ClientRueidis.
	Client string
}

// The clients Options.Client names.
const (
	// ClientGoRedis reads through a hedgeredis.Client over one go-redis
	// client per replica.
	ClientGoRedis = "go-redis"
	// ClientRueidis reads through a hedgerueidis.Client over one rueidis
	// client per replica. rueidis pipelines every GET over a few shared
	// connections per server (ClientOption.PipelineMultiplex) instead of
	// taking one from a pool, so nothing in it corresponds to go-redis's
	// pool size: its BlockingPoolSize serves blocking commands only, and
	// PipelineMultiplex sets how many connections share the pipeline, not
	// how many commands may wait for one.
	ClientRueidis = "rueidis"
)

// Clients returns the names Options.Client accepts, the default first.
func Clients() []string { return []string{ClientGoRedis, ClientRueidis} }

// client returns o.Client with its default, or an error naming the
// choices.
func (o Options) client() (string, error) {
	switch o.Client {
	case "", ClientGoRedis:
		return ClientGoRedis, nil
	case ClientRueidis:
		if o.PoolSize != 0 {
			return "", fmt.Errorf("redisbench: PoolSize %d applies to go-redis only: rueidis pipelines reads over shared connections and has no pool of that kind; leave PoolSize 0 with the rueidis client", o.PoolSize)
		}
		return ClientRueidis, nil
	}
	return "", fmt.Errorf("redisbench: Client %q: use %s", o.Client, strings.Join(Clients(), " or "))
}

// Backend is a set of running redis-server processes holding the same
// keys: key k:N (N below bench.Keys) holds bench.ValueSize bytes.
type Backend struct {
	servers []*redistest.Server
	pool    int
	client  string // ClientGoRedis or ClientRueidis
	keys    []string

	stalls []*stallConn
	once   sync.Once
	err    error
}

// stallConn is a connection of its own to one server, for DEBUG SLEEP.
type stallConn struct {
	mu   sync.Mutex
	addr string
	c    net.Conn
	r    *bufio.Reader
}

// Start starts the servers, fills them with the keys and returns once
// every one answers. If redis-server is missing, the error says which
// package to install. Mistakes in o are reported before any server
// starts.
func Start(o Options) (*Backend, error) {
	n := o.Replicas
	if n == 0 {
		n = 3
	}
	if n < 2 || n > 64 {
		return nil, fmt.Errorf("redisbench: %d replicas: use 2 to 64", n)
	}
	client, err := o.client()
	if err != nil {
		return nil, err
	}
	servers, err := redistest.StartN(n, redistest.Options{
		Binary:       o.Binary,
		StartTimeout: 10 * time.Second,
		StopTimeout:  3 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	b := &Backend{servers: servers, pool: o.PoolSize, client: client, keys: make([]string, bench.Keys)}
	for k := range b.keys {
		b.keys[k] = "k:" + strconv.Itoa(k)
	}
	for _, s := range servers {
		b.stalls = append(b.stalls, &stallConn{addr: s.Addr})
	}
	if err := b.fill(); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// fill writes every key on every server.
func (b *Backend) fill() error {
	value := strings.Repeat("v", bench.ValueSize)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range b.servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range b.keys {
				p.Set(ctx, k, value, 0)
			}
			return nil
		})
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("redisbench: filling %s: %w", s.Addr, err)
		}
	}
	return nil
}

// Name returns "redis".
func (b *Backend) Name() string { return "redis" }

// Replicas returns the number of servers.
func (b *Backend) Replicas() int { return len(b.servers) }

// Addrs returns the servers' addresses.
func (b *Backend) Addrs() []string {
	out := make([]string, len(b.servers))
	for i, s := range b.servers {
		out[i] = s.Addr
	}
	return out
}

// Pids returns the servers' process ids.
func (b *Backend) Pids() []int {
	out := make([]int, len(b.servers))
	for i, s := range b.servers {
		out[i] = s.Pid
	}
	return out
}

// Stall sends DEBUG SLEEP d to server i and returns when the server has
// answered it, that is when it serves again. ctx ending does not cut the
// sleep short (nothing can); Stall then still waits for the answer, at most
// d plus 5 s.
func (b *Backend) Stall(ctx context.Context, i int, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.stalls[i].sleep(d)
}

func (sc *stallConn) sleep(d time.Duration) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.c == nil {
		c, err := net.DialTimeout("tcp", sc.addr, 2*time.Second)
		if err != nil {
			return fmt.Errorf("redisbench: stall: %w", err)
		}
		sc.c, sc.r = c, bufio.NewReader(c)
	}
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	cmd := fmt.Sprintf("*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$%d\r\n%s\r\n", len(secs), secs)
	_ = sc.c.SetDeadline(time.Now().Add(d + 5*time.Second))
	_, err := sc.c.Write([]byte(cmd))
	var line string
	if err == nil {
		line, err = sc.r.ReadString('\n')
	}
	if err == nil && line != "+OK\r\n" {
		err = fmt.Errorf("DEBUG SLEEP answered %q (is the server started with --enable-debug-command yes?)", strings.TrimSpace(line))
	}
	if err != nil {
		_ = sc.c.Close()
		sc.c, sc.r = nil, nil
		return fmt.Errorf("redisbench: stall of %s: %w", sc.addr, err)
	}
	return nil
}

func (sc *stallConn) close() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.c != nil {
		_ = sc.c.Close()
		sc.c = nil
	}
}

// Served returns how many GET commands each server has run
// (INFO commandstats), hedge copies included; -1 where a server did not
// answer within a second.
func (b *Backend) Served() []int64 {
	out := make([]int64, len(b.servers))
	for i, s := range b.servers {
		out[i] = getCalls(s.Addr)
	}
	return out
}

// getCalls reads cmdstat_get's calls from INFO commandstats, on a
// connection of its own, or returns -1.
func getCalls(addr string) int64 {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return -1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")); err != nil {
		return -1
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n') // $<length>
	if err != nil || !strings.HasPrefix(head, "$") {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 || n > 1<<20 {
		return -1
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_get:calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		calls, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -1
		}
		return calls
	}
	return 0 // no GET yet
}

// Close stops every server by pid and returns once they have exited.
func (b *Backend) Close() error {
	b.once.Do(func() {
		for _, sc := range b.stalls {
			sc.close()
		}
		b.err = redistest.StopAll(b.servers)
	})
	return b.err
}

// NewClient returns a client that sends GET k:N through the client
// Options.Client named, hedging as cfg says. With go-redis it is a
// hedgeredis.Client over the servers (hedgeredis always reaps losers in
// the background: go-redis cannot interrupt a read); each replica has its
// own go-redis pool; go-redis's retries are off, so that every copy sent
// is one the Hedger decided. With rueidis, see newRueidis.
func (b *Backend) NewClient(cfg hedge.Config) (bench.Client, error) {
	if b.client == ClientRueidis {
		c, err := b.newRueidis(cfg)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	opts := make([]*redis.Options, len(b.servers))
	for i, s := range b.servers {
		opts[i] = &redis.Options{
			Addr:                  s.Addr,
			PoolSize:              b.pool,
			MaxRetries:            -1,
			DialTimeout:           2 * time.Second,
			ContextTimeoutEnabled: true,
		}
	}
	c, err := hedgeredis.NewFromOptions(opts, hedgeredis.Config{Hedge: cfg})
	if err != nil {
		return nil, err
	}
	return bench.ClientFuncs{
		DoFunc: func(ctx context.Context, i int) error {
			err := c.Get(ctx, b.keys[i%bench.Keys]).Err()
			if errors.Is(err, redis.Nil) {
				return fmt.Errorf("key %s missing", b.keys[i%bench.Keys])
			}
			return err
		},
		StatsFunc: func() bench.ClientStats {
			st := c.Stats()
			s := bench.HedgerStats(st.Op("GET"))
			s.PoolWaits, s.PoolWaitTime, s.PoolTimeouts, s.Dials = 0, 0, 0, 0
			for _, r := range st.Replicas {
				s.PoolWaits += int64(r.Pool.WaitCount)
				s.PoolWaitTime += r.PoolWait()
				s.PoolTimeouts += int64(r.Pool.Timeouts)
				s.Dials += int64(r.Pool.Misses)
			}
			return s
		},
		CloseFunc: c.Close,
	}, nil
}

// NewLeafReader reads a key from one replica through a plain go-redis
// client per replica, for the fan-out call (bench.LeafReader), which
// hedges the leaves itself.
func (b *Backend) NewLeafReader() (func(ctx context.Context, r, k int) error, func(), error) {
	cs := make([]*redis.Client, len(b.servers))
	for i, s := range b.servers {
		cs[i] = redis.NewClient(&redis.Options{
			Addr:                  s.Addr,
			PoolSize:              b.pool,
			MaxRetries:            -1,
			DialTimeout:           2 * time.Second,
			ContextTimeoutEnabled: true,
		})
	}
	read := func(ctx context.Context, r, k int) error {
		err := cs[r].Get(ctx, b.keys[k]).Err()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("key %s missing", b.keys[k])
		}
		return err
	}
	release := func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	return read, release, nil
}
