package hedgerueidis

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/hedgeredis"
	"github.com/tailcut/hedge/internal/redistest"
)

// BenchmarkGet compares, in one run over the same three loopback
// redis-servers, what a GET costs the client with hedging armed but never
// firing (a one-hour delay) against the plain client under it, for both
// Redis clients: go-redis against hedgeredis, rueidis against
// hedgerueidis. Each runs one call at a time, then from parallel
// goroutines (GOMAXPROCS x 8 callers). Besides time per call it reports
// the client process's CPU time per call (cpu-µs/op: user + system from
// getrusage; the servers are other processes).
//
// rueidis reads a command synchronously on the caller's goroutine when
// its context has no Done channel and nothing else is in flight, and
// pipelines it through its connection's goroutines otherwise; a hedged
// copy always has a cancellable context, and hedgerueidis spreads reads
// over the three servers, so "rueidis-replicas" (the Client's own
// rueidis clients taken in turn, with a cancellable context) is the
// like-for-like baseline: reading from replicas without hedging.
// "rueidis-cancellable" (one plain client, a cancellable context) and
// "rueidis" (context.Background, on a client of its own) show what one
// connection and the synchronous path save; auto-pipelining batches
// parallel callers better over one connection than over three.
//
//	go test ./hedgerueidis -run '^$' -bench . -benchmem -count 5
func BenchmarkGet(b *testing.B) {
	servers := redistest.Start(b, 3)
	hedged := hedge.Config{Delay: hedge.Fixed(time.Hour)}
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()

	goOpts := make([]*redis.Options, len(servers))
	ruOpts := make([]rueidis.ClientOption, len(servers))
	for i, s := range servers {
		goOpts[i] = &redis.Options{Addr: s.Addr}
		ruOpts[i] = options(s)
	}
	gr, err := hedgeredis.NewFromOptions(goOpts, hedgeredis.Config{Hedge: hedged})
	if err != nil {
		b.Fatal(err)
	}
	defer gr.Close()
	hr, err := NewFromOptions(ruOpts, Config{Hedge: hedged})
	if err != nil {
		b.Fatal(err)
	}
	defer hr.Close()
	plain := func() rueidis.Client {
		rc, err := rueidis.NewClient(ruOpts[0])
		if err != nil {
			b.Fatal(err)
		}
		return rc
	}
	ru, ruc := plain(), plain()
	defer ru.Close()
	defer ruc.Close()
	seed(b, hr, "k", "v")
	var next atomic.Uint64

	cases := []struct {
		name string
		get  func() error
	}{
		{"go-redis", func() error { return gr.Replica(0).Get(ctx, "k").Err() }},
		{"hedgeredis", func() error { return gr.Get(ctx, "k").Err() }},
		{"rueidis", func() error { return ru.Do(ctx, ru.B().Get().Key("k").Build()).Error() }},
		{"rueidis-cancellable", func() error { return ruc.Do(cctx, ruc.B().Get().Key("k").Build()).Error() }},
		{"rueidis-replicas", func() error {
			rc := hr.Replica(int(next.Add(1) % uint64(hr.Len())))
			return rc.Do(cctx, rc.B().Get().Key("k").Build()).Error()
		}},
		{"hedgerueidis", func() error { return hr.Get(ctx, "k").Error() }},
	}
	for _, parallel := range []bool{false, true} {
		for _, tc := range cases {
			name := tc.name
			if parallel {
				name += "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				defer reportCPU(b)()
				if !parallel {
					for b.Loop() {
						if err := tc.get(); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := tc.get(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
	if h := gr.Stats().Op("GET").Hedges + hr.Stats().Op("GET").Hedges; h != 0 {
		b.Fatalf("%d hedges fired", h)
	}
}

// reportCPU starts measuring the process's CPU time and returns the
// function that reports it per call.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
