// Package settest drives the traffic the exporters' tests read back: a
// Hedger whose replicas differ (one slow, one that refuses every
// connection), a fan-out over shards, a tied client and server through
// most of their counters, and a fleet Watcher. All but ShardedFan run on
// synctest's fake clock.
package settest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/fleet"
	"github.com/tailcut/hedge/internal/hedgeset"
	"github.com/tailcut/hedge/tied"
)

const ms = time.Millisecond

// Replicas returns a Hedger over three replicas, after calls calls of op
// "get": replica 0 refuses every connection (hedge.ErrNotSent: failovers,
// errors, and probation), replica 1 answers after 50 ms unless cancelled,
// replica 2 after 2 ms. The hedge delay is 10 ms, with no budget, so
// slow primaries are hedged and their hedges win. Call it inside a
// synctest bubble; it returns a second of the fake clock after the last
// call, once the Hedger's timer goroutine exited.
//
// The Hedger draws its routing from math/rand/v2's global source, which
// a test cannot seed: a workload may, by chance, send replica 0 only
// hedges (no failover) or no primary to replica 1 (no hedge). So
// Replicas draws workloads on fresh Hedgers until one has exercised every
// series (a failover, an error, a hedge, a hedge win, a replica on
// probation); each draw misses with a probability of a few percent.
func Replicas(t testing.TB, calls int) *hedge.Hedger {
	t.Helper()
	for range 100 {
		if h := replicas(t, calls); exercised(h) {
			return h
		}
	}
	t.Fatalf("settest: 100 workloads of %d calls, none exercised every replica series", calls)
	return nil
}

func replicas(t testing.TB, calls int) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(hedge.Config{Replicas: 3, Delay: hedge.Fixed(10 * ms), NoBudget: true,
		MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	refused := hedge.NotSent(fmt.Errorf("dial tcp 10.0.0.1:80: %w", syscall.ECONNREFUSED))
	for range calls {
		hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
			d := 2 * ms
			switch a.Replica {
			case 0:
				return 0, refused
			case 1:
				d = 50 * ms
			}
			select {
			case <-time.After(d):
				return a.Replica, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
	}
	time.Sleep(time.Second) // the Hedger's timer goroutine exits when idle
	return h
}

// exercised reports whether h's replicas have every series Replicas
// promises a value other than zero.
func exercised(h *hedge.Hedger) bool {
	var errs, hedges, wins int64
	probation := false
	for _, r := range h.ReplicaStats() {
		errs, hedges, wins = errs+r.Errors, hedges+r.Hedges, wins+r.HedgeWins
		probation = probation || r.Probation
	}
	return errs > 0 && hedges > 0 && wins > 0 && probation && h.OpStats("get").Failovers > 0
}

// Peer is the address of the tied server's one peer.
const Peer = "http://10.0.0.2:8080"

// sender answers claims with the answer or error it is set to.
type sender struct {
	mu     sync.Mutex
	answer string
	err    error
}

func (s *sender) set(answer string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer, s.err = answer, err
}

func (s *sender) SendClaim(ctx context.Context, addr, msg string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answer, s.err
}

// Tied is a tied client and server, each driven through most of its
// counters, and Release, which lets the server's one running request
// finish and empties its queue. Until then the server has one request
// running and one queued.
type Tied struct {
	Client  *tied.Client
	Server  *tied.Server
	Release func()
}

// TiedTraffic makes a tied client with two replicas and sends it five
// calls: answered by the first copy, won by the second, a first copy
// that never reached its server, one dropped for its sibling, one that
// failed. It makes a tied server with one worker and a queue of one, and
// admits: a tied copy whose claim is granted, one whose claim is lost,
// one whose claim fails, one with an unknown sibling, then an untied
// request that runs, one that waits in the queue, and one refused; it
// counts a bad tie and a forged claim. Call it inside a synctest bubble;
// call Release before the bubble ends.
func TiedTraffic(t testing.TB) Tied {
	t.Helper()
	c, err := tied.NewClient(tied.ClientConfig{Replicas: 2, Gap: ms})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for call, first := range []func(context.Context) error{
		func(context.Context) error { return nil },
		func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		func(context.Context) error { return tied.NotSent(errors.New("connection refused")) },
		func(context.Context) error { return tied.ErrDropped },
		func(context.Context) error { return errors.New("boom") },
	} {
		_, release, _ := tied.Run(ctx, c, func(ctx context.Context, cp tied.Copy) (int, error) {
			if cp.Index == 0 {
				return 0, first(ctx)
			}
			if call == 4 {
				return 0, errors.New("boom")
			}
			return 1, nil
		}, nil)
		release()
	}

	snd := &sender{}
	s, err := tied.NewServer(tied.Config{Workers: 1, MaxQueue: 1, Secret: []byte("0123456789abcdef0123456789abcdef-settest"),
		Peers: []string{Peer}, Sender: snd})
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []struct {
		answer string
		err    error
	}{{"go", nil}, {"lost", nil}, {"", errors.New("peer down")}} {
		snd.set(answer.answer, answer.err)
		if release, err := s.Admit(ctx, tied.Tie{ID: tied.NewID(), Sibling: Peer}); err == nil {
			release()
		}
	}
	if release, err := s.Admit(ctx, tied.Tie{ID: tied.NewID(), Sibling: "http://10.0.0.9:8080"}); err == nil {
		release()
	}
	s.CountBadTie()
	_, _ = s.ReceiveClaim("forged")

	running, err := s.Admit(ctx, tied.Tie{})
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan func())
	go func() {
		release, err := s.Admit(ctx, tied.Tie{})
		if err != nil {
			panic(err)
		}
		queued <- release
	}()
	synctest.Wait() // the second request waits in the queue
	if _, err := s.Admit(ctx, tied.Tie{}); !errors.Is(err, tied.ErrQueueFull) {
		t.Fatalf("a third request with one running and one queued: %v, want ErrQueueFull", err)
	}
	return Tied{Client: c, Server: s, Release: func() {
		running()
		(<-queued)()
		s.Close()
	}}
}

// Mistake is a wrong set of tied options, and what the error must say.
type Mistake struct {
	Clients []hedgeset.Item[tied.Client] // WithTiedClient(Name, V), in order
	Servers []hedgeset.Item[tied.Server] // WithTiedServer(Name, V), in order
	Want    string
}

// TiedMistakes returns the mistakes an exporter's tied options must
// report, each given with no Hedger: nothing at all, a nil client or
// server, an empty or non-UTF-8 name, a name given twice, one client
// under two names.
func TiedMistakes(t testing.TB) []Mistake {
	t.Helper()
	c, err := tied.NewClient(tied.ClientConfig{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tied.NewServer(tied.Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	type cs = []hedgeset.Item[tied.Client]
	type ss = []hedgeset.Item[tied.Server]
	return []Mistake{
		{Want: "no hedgers"},
		{Clients: cs{{Name: "front"}}, Want: `WithTiedClient("front", nil): pass the *tied.Client made with tied.NewClient`},
		{Servers: ss{{Name: "items"}}, Want: `WithTiedServer("items", nil): pass the *tied.Server made with tied.NewServer`},
		{Clients: cs{{Name: "", V: c}}, Want: `WithTiedClient("", ...): the name is empty`},
		{Servers: ss{{Name: "\xff", V: s}}, Want: "not valid UTF-8"},
		{Servers: ss{{Name: "a", V: s}, {Name: "a", V: s}}, Want: `WithTiedServer("a", ...) is given more than once`},
		{Clients: cs{{Name: "a", V: c}, {Name: "b", V: c}}, Want: `tied client "a" and "b" are the same *tied.Client`},
	}
}

// Burst returns a Hedger over two replicas that never hedges
// (MaxAttempts 1), after a burst of slowness and a recovery: 40 calls
// answered in 800 ms, then, a minute later, 40 answered in 2 ms.
// Its replicas' latency since it was made keeps the burst in its p99;
// their recent latency holds the fast answers alone. Call it inside a
// synctest bubble.
func Burst(t testing.TB) *hedge.Hedger {
	t.Helper()
	h, err := hedge.New(hedge.Config{Replicas: 2, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	call := func(d time.Duration) {
		hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
			time.Sleep(d)
			return a.Replica, nil
		})
	}
	for range 40 {
		call(800 * ms)
	}
	time.Sleep(time.Minute) // the span of a Hedger's ReplicaStats.Recent
	for range 40 {
		call(2 * ms)
	}
	return h
}

// ShardedFan returns a Hedger after one fan-out of op "get": 4 leaves
// over 4 shards of 2 servers named by address ("10.0.0.1:6379" to
// "10.0.0.8:6379"), that needs 2. Leaf 1 fails on its own, leaf 0
// answers, leaf 2 answers once the failure is counted, and leaf 3 waits
// until cancelled (not needed). Every leaf is sent before any answers
// (they wait for all four to start), so the counts are exact.
func ShardedFan(t testing.TB) *hedge.Hedger {
	t.Helper()
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("10.0.0.%d:6379", i+1)
	}
	h, err := hedge.New(hedge.Config{Replicas: 8, Shards: hedge.ShardGrid(4, 2), ReplicaNames: names, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 4)
	all := make(chan struct{})
	go func() {
		for range 4 {
			<-started
		}
		close(all)
	}()
	_, err = hedge.DoFan(context.Background(), h, "get", 4, hedge.FanOut{Need: 2}, func(ctx context.Context, i int, _ hedge.Attempt) (int, error) {
		started <- struct{}{}
		<-all
		switch i {
		case 1:
			return 0, errors.New("shard 1 is broken")
		case 2:
			for h.OpStats("get").Shards[1].Failures == 0 {
				runtime.Gosched()
			}
		case 3:
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return i, nil
	})
	if err != nil {
		t.Fatalf("settest: DoFan: %v", err)
	}
	return h
}

// Watch makes a fleet Watcher of opts and runs it until the test ends; its
// log is discarded unless opts.Logger is set. Call it inside a synctest
// bubble: the Watcher's goroutine is ended in a t.Cleanup.
func Watch(t testing.TB, opts fleet.Options) *fleet.Watcher {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w, err := fleet.NewWatcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// ModeSteps switches two Hedgers, named "a" and "b" in their set, through
// the steps an operator takes (a kill switch on a, a 5% rollout on b, b
// to shadow, then a fleet policy's live off on a and its end), and calls
// check after each, and before the first, with the name of the step and
// the mode and rollout each Hedger should show.
func ModeSteps(t testing.TB, a, b *hedge.Hedger, check func(when string, modes map[string]string, rollouts map[string]float64)) {
	t.Helper()
	check("at first", map[string]string{"a": "on", "b": "on"}, map[string]float64{"a": 1, "b": 1})
	if err := a.SetMode(hedge.Off); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRollout(0.05); err != nil {
		t.Fatal(err)
	}
	check("after the kill switch on a and a rollout on b", map[string]string{"a": "off", "b": "on"}, map[string]float64{"a": 1, "b": 0.05})
	if err := b.SetMode(hedge.Shadow); err != nil {
		t.Fatal(err)
	}
	check("after b's switch to shadow", map[string]string{"a": "off", "b": "shadow"}, map[string]float64{"a": 1, "b": 0.05})
	// A fleet policy's live settings turn a off while its own switch is
	// on: the gauge shows the mode its requests run in.
	if err := a.SetMode(hedge.On); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLive(hedge.Live{Settings: hedge.Settings{Mode: hedge.Off}}); err != nil {
		t.Fatal(err)
	}
	check("after a live policy's off on a", map[string]string{"a": "off", "b": "shadow"}, map[string]float64{"a": 1, "b": 0.05})
	if err := a.SetLive(hedge.Live{}); err != nil {
		t.Fatal(err)
	}
	check("after the live policy is lifted", map[string]string{"a": "on", "b": "shadow"}, map[string]float64{"a": 1, "b": 0.05})
}
