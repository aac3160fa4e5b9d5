package hedgeredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge/internal/redistest"
)

// These tests establish what go-redis v9.23.0 does with a connection whose
// command was cancelled while its reply was awaited, and that hedging's
// cancelled losers leave every pool clean. See the package doc,
// "Cancelled copies".

// markConn is a net.Conn that reports each write of a command naming the
// probe key, so that a test can cancel exactly while the reply is awaited.
// It does not implement syscall.Conn, which turns off go-redis's idle-conn
// health check (pool.connCheck): the tests below see the pool without that
// second line of defence.
type markConn struct {
	net.Conn
	wrote chan struct{}
}

func (m *markConn) Write(b []byte) (int, error) {
	n, err := m.Conn.Write(b)
	if err == nil && bytes.Contains(b, []byte("probe")) {
		select {
		case m.wrote <- struct{}{}:
		default:
		}
	}
	return n, err
}

// TestGoRedisCancelMidReply sends GET to a stalled server and, once the
// command is on the wire, cancels its context or lets its deadline pass,
// and only then releases the server.
//
//   - Cancellation is ignored once the command is written, with or without
//     ContextTimeoutEnabled: the call returns the real reply when the
//     server answers, and the connection goes back to the pool clean.
//   - A deadline is ignored too unless ContextTimeoutEnabled is set; with
//     it, the deadline becomes the socket's read deadline, the read fails
//     with a timeout, and go-redis removes the connection (StaleConns + 1,
//     a new dial for the next command), which then reads its own reply.
func TestGoRedisCancelMidReply(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	for _, tc := range []struct {
		name           string
		ctxTimeout     bool // redis.Options.ContextTimeoutEnabled
		deadline       bool // a deadline passes, instead of a cancel
		wantRemoved    bool
		wantCtxTimeout bool
	}{
		{name: "cancel", ctxTimeout: false},
		{name: "cancel/ContextTimeoutEnabled", ctxTimeout: true},
		{name: "deadline", ctxTimeout: false, deadline: true},
		{name: "deadline/ContextTimeoutEnabled", ctxTimeout: true, deadline: true, wantRemoved: true, wantCtxTimeout: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A deadline may pass before the GET is even written, on a
			// slow enough machine: then try again with twice as long,
			// so that the outcome does not depend on the scheduling.
			for timeout := 50 * time.Millisecond; !cancelMidReply(t, s, tc.ctxTimeout, tc.deadline, timeout, tc.wantRemoved, tc.wantCtxTimeout); timeout *= 2 {
				if timeout > time.Minute {
					t.Fatalf("a GET with a deadline of %v ended before it was written", timeout)
				}
				t.Logf("the GET ended before it was written, within its deadline of %v: trying again", timeout)
			}
		})
	}
}

// cancelMidReply is one try of a case of TestGoRedisCancelMidReply, with
// the given deadline if deadline is set. It reports false, having checked
// nothing, if the GET ended before it was written.
func cancelMidReply(t *testing.T, s *redistest.Server, ctxTimeout, deadline bool, timeout time.Duration, wantRemoved, wantCtxTimeout bool) bool {
	t.Helper()
	var dials atomic.Int64
	wrote := make(chan struct{}, 1)
	rc := redis.NewClient(patient(&redis.Options{
		Addr:                  s.Addr,
		ContextTimeoutEnabled: ctxTimeout,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			dials.Add(1)
			return &markConn{Conn: c, wrote: wrote}, nil
		},
	}))
	defer rc.Close()
	bg := context.Background()
	if err := rc.Set(bg, "probe", "mine", 0).Err(); err != nil {
		t.Fatal(err)
	}
	<-wrote // the SET's mark
	if err := rc.Set(bg, "other", "theirs", 0).Err(); err != nil {
		t.Fatal(err)
	}

	st := stall(t, s)
	ctx, cancel := context.WithCancel(bg)
	if deadline {
		ctx, cancel = context.WithTimeout(bg, timeout)
	}
	defer cancel()
	res := make(chan *redis.StringCmd, 1)
	go func() { res <- rc.Get(ctx, "probe") }()
	var cmd *redis.StringCmd
	select {
	case <-wrote: // GET probe is on the wire, held by the stalled server
	case cmd = <-res:
		select {
		case <-wrote: // written, then cut by its deadline: a normal end
		default:
			release(t, st)
			return false
		}
	}
	switch {
	case !deadline:
		cancel()
	case !ctxTimeout:
		<-ctx.Done() // let the deadline pass while the server holds the GET
	}
	if wantCtxTimeout {
		if cmd == nil {
			cmd = <-res // the read deadline ends it, the server still stalled
		}
		release(t, st)
	} else {
		release(t, st)
		if cmd == nil {
			cmd = <-res
		}
	}

	if wantCtxTimeout {
		var ne net.Error
		if err := cmd.Err(); !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("GET = %v; want a timeout", err)
		}
	} else if v, err := cmd.Result(); v != "mine" || err != nil {
		t.Fatalf("GET = %q, %v; want the reply, the cancellation ignored", v, err)
	}
	p := rc.PoolStats()
	if wantRemoved {
		if p.StaleConns != 1 || p.TotalConns != 0 {
			t.Errorf("pool after the cut read: %d stale, %d total; want the connection removed (1, 0)", p.StaleConns, p.TotalConns)
		}
	} else if p.StaleConns != 0 || p.TotalConns != 1 || p.IdleConns != 1 {
		t.Errorf("pool: %d stale, %d total, %d idle; want the connection back in the pool (0, 1, 1)", p.StaleConns, p.TotalConns, p.IdleConns)
	}
	// The next commands read their own replies.
	for _, kv := range [][2]string{{"other", "theirs"}, {"probe", "mine"}, {"other", "theirs"}} {
		if v, err := rc.Get(bg, kv[0]).Result(); v != kv[1] || err != nil {
			t.Errorf("GET %s = %q, %v; want %q", kv[0], v, err, kv[1])
		}
	}
	wantDials := int64(1)
	if wantRemoved {
		wantDials = 2
	}
	if got := dials.Load(); got != wantDials {
		t.Errorf("%d dials, want %d", got, wantDials)
	}
	return true
}

// keyset is data that makes a reply read by the wrong command visible:
// values of different lengths and types under keys that name their index.
type keyset struct{ n int }

func (k keyset) str(i int) (string, string) {
	return fmt.Sprintf("p:s:%d", i), fmt.Sprintf("v%d-%s", i, strings.Repeat("x", i*37%300))
}
func (k keyset) hash(i int) (string, map[string]string) {
	return fmt.Sprintf("p:h:%d", i), map[string]string{"f": fmt.Sprintf("h%d", i), "g": fmt.Sprint(i * i)}
}
func (k keyset) list(i int) (string, []string) {
	return fmt.Sprintf("p:l:%d", i), []string{fmt.Sprintf("l%d", i), fmt.Sprintf("m%d", i)}
}

func (k keyset) seed(ctx context.Context, rc *redis.Client) error {
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range k.n {
			key, v := k.str(i)
			p.Set(ctx, key, v, 0)
			hk, h := k.hash(i)
			p.HSet(ctx, hk, h)
			lk, l := k.list(i)
			p.Del(ctx, lk)
			p.RPush(ctx, lk, l[0], l[1])
		}
		return nil
	})
	return err
}

// reader is the part of the API the check runs on: a hedged Client, or
// one replica's *redis.Client.
type reader interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	LRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd
}

// check runs one read of kind op on key i and compares the reply with the
// key's own value. A failed read's error is wrapped; a wrong reply is an
// error of its own.
func (k keyset) check(ctx context.Context, r reader, op, i int) error {
	switch op % 3 {
	case 0:
		key, want := k.str(i)
		got, err := r.Get(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		if got != want {
			return fmt.Errorf("GET %s = %.20q; want %.20q", key, got, want)
		}
	case 1:
		key, want := k.hash(i)
		got, err := r.HGetAll(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("HGETALL %s: %w", key, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("HGETALL %s = %v; want %v", key, got, want)
		}
	case 2:
		key, want := k.list(i)
		got, err := r.LRange(ctx, key, 0, -1).Result()
		if err != nil {
			return fmt.Errorf("LRANGE %s: %w", key, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("LRANGE %s = %v; want %v", key, got, want)
		}
	}
	return nil
}

// isTimeout reports whether err is a deadline passing: the context's, or a
// socket's set from it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// checkAll reads every key three ways on every replica's client and on the
// hedged client, in sequence, so that any reply left on a pooled
// connection would be read by the next command and differ from its own.
func (k keyset) checkAll(t *testing.T, c *Client) {
	t.Helper()
	ctx := context.Background()
	readers := []reader{c}
	for i := range c.Len() {
		readers = append(readers, c.Replica(i))
	}
	for ri, r := range readers {
		for i := range k.n {
			for op := range 3 {
				if err := k.check(ctx, r, op, i); err != nil {
					t.Errorf("reader %d (0 hedged, then replicas): %v", ri, err)
				}
			}
		}
	}
}

// storm runs workers reading random keys through the hedged client until
// stop is closed, and reports any wrong reply or failed read. timeout, if
// positive, is each call's deadline; a call may then end by it (both its
// copies held up long enough, which depends on the scheduling), and that
// is not a failure.
func (k keyset) storm(t *testing.T, c *Client, workers int, timeout time.Duration, stop <-chan struct{}) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if timeout > 0 {
					ctx, cancel = context.WithTimeout(ctx, timeout)
				}
				err := k.check(ctx, c, r.IntN(3), r.IntN(k.n))
				cancel()
				if err != nil && !(timeout > 0 && isTimeout(err)) {
					t.Errorf("during the storm: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// checkPools asserts that every pool is within its size and saw no
// timeout.
func checkPools(t *testing.T, s Stats, size uint32) {
	t.Helper()
	for _, r := range s.Replicas {
		p := r.Pool
		if p.TotalConns > size || p.IdleConns > p.TotalConns || p.Timeouts != 0 || p.PendingRequests != 0 {
			t.Errorf("replica %d pool: total %d (size %d), idle %d, timeouts %d, pending %d", r.Index, p.TotalConns, size, p.IdleConns, p.Timeouts, p.PendingRequests)
		}
	}
}

// TestCancelledCopiesDoNotPoisonPools stalls one replica, three times,
// under a storm of hedged reads of many keys through small pools, so that
// copies lose while their command is on the wire, then reads every key on
// every client and checks each reply is its own.
//
// Without ContextTimeoutEnabled the losers read their replies to the end
// when the stall is released and their connections return to the pool: no
// connection is removed, all are reused, every reply matches. With it and
// a per-call deadline, the losers' reads are cut by the deadline while the
// replica is stalled, and go-redis removes those connections (StaleConns).
//
// Each stall lasts until the storm has shown what it is there to show (a
// loser held by the stalled replica, hedges won elsewhere, and with
// deadlines a connection removed), however long the scheduling makes that.
func TestCancelledCopiesDoNotPoisonPools(t *testing.T) {
	servers := redistest.Start(t, 3)
	const stalled, poolSize, workers, rounds = 1, 4, 12, 3
	k := keyset{n: 40}
	for _, tc := range []struct {
		name       string
		ctxTimeout bool
		timeout    time.Duration
	}{
		{name: "cancel"},
		{name: "deadline/ContextTimeoutEnabled", ctxTimeout: true, timeout: 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startClient(t, servers, hedgeNow(), func(o *redis.Options) {
				o.PoolSize = poolSize
				o.ContextTimeoutEnabled = tc.ctxTimeout
			})
			seed(t, c, k.seed)
			k.checkAll(t, c) // warm every pool
			before := c.Stats().Replicas[stalled].Pool
			hedgeWins := func() int64 {
				var n int64
				for _, op := range c.Stats().Ops {
					n += op.HedgeWins
				}
				return n
			}

			stop := make(chan struct{})
			stormed := make(chan struct{})
			go func() {
				defer close(stormed)
				k.storm(t, c, workers, tc.timeout, stop)
			}()
			defer func() {
				select {
				case <-stop:
				default:
					close(stop)
				}
				<-stormed
			}()
			for range rounds {
				wins := hedgeWins()
				stale := c.Stats().Replicas[stalled].Pool.StaleConns
				st := stall(t, servers[stalled])
				waitFor(t, "hedges to win around the stalled replica", func() bool {
					r := c.Stats().Replicas[stalled]
					ok := hedgeWins() >= wins+5 && r.InFlight > 0
					if tc.ctxTimeout {
						ok = ok && r.Pool.StaleConns > stale
					}
					return ok
				})
				release(t, st)
			}
			close(stop)
			<-stormed
			waitFor(t, "the losers to return", func() bool { return idle(c) })

			s := c.Stats()
			r := s.Replicas[stalled]
			removed := r.Pool.StaleConns - before.StaleConns
			t.Logf("%d hedge wins; stalled replica: %d copies, %d failed, %d cancelled, %d conns removed, %d pool waits (%v)",
				hedgeWins(), r.Copies, r.Failed, r.Cancelled, removed, r.Pool.WaitCount, r.PoolWait())
			if r.Failed != 0 {
				t.Errorf("%d copies to the stalled replica failed while still wanted", r.Failed)
			}
			if tc.ctxTimeout {
				if removed < rounds {
					t.Errorf("%d connections of the stalled replica removed; want one or more per stall, cut by deadlines", removed)
				}
			} else if removed != 0 {
				t.Errorf("%d connections of the stalled replica removed; want 0 (losers read their replies)", removed)
			}
			checkPools(t, s, poolSize)
			k.checkAll(t, c)
			checkPools(t, c.Stats(), poolSize)
		})
	}
}

// TestReadsCutMidTransfer cuts GETs of a large value at random points of
// the transfer with short deadlines (ContextTimeoutEnabled), so that some
// connections hold part of a reply when their read fails, then checks that
// the next commands on the same client read their own replies.
func TestReadsCutMidTransfer(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 2, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rc.Close()
	bg := context.Background()
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	if err := rc.Set(bg, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(bg, "small", "s", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var cut, whole int
	for range 40 {
		ctx, cancel := context.WithTimeout(bg, time.Duration(50+r.IntN(3000))*time.Microsecond)
		v, err := rc.Get(ctx, "big").Result()
		cancel()
		switch {
		case err == nil && v == big:
			whole++
		case err != nil:
			cut++
		default:
			t.Fatalf("GET big returned %d bytes without an error", len(v))
		}
		if v, err := rc.Get(bg, "small").Result(); v != "s" || err != nil {
			t.Fatalf("GET small after a cut GET big = %.20q, %v", v, err)
		}
	}
	p := rc.PoolStats()
	t.Logf("%d reads cut, %d whole; pool: %d removed, %d total", cut, whole, p.StaleConns, p.TotalConns)
	if p.TotalConns > 2 || p.IdleConns > p.TotalConns {
		t.Errorf("pool: %d total, %d idle", p.TotalConns, p.IdleConns)
	}
}
