package hedgerueidis

import (
	"context"
	"os"
	"strconv"
	"strings"
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
// getrusage; the servers are other processes) and, where /proc/self/io
// tells, its read and write system calls per call (syscalls/op).
//
// rueidis reads a command synchronously on the caller's goroutine when
// its context has no Done channel and nothing else is in flight on a
// connection that has never pipelined, and pipelines it through the
// connection's writer and reader goroutines otherwise, for good: only
// there does cancellation end the wait. A hedged copy must be
// cancellable, so hedgerueidis always pipelines, over three servers;
// "rueidis-replicas" (the Client's own rueidis clients taken in turn,
// with a cancellable context) is the like-for-like baseline: reading
// from replicas without hedging. The other rueidis rows take one
// connection apart: "rueidis" (context.Background, on a client of its
// own: synchronous while serial), "rueidis-pipelined" (the same, with
// ClientOption.AlwaysPipelining: the pipeline without a Done channel)
// and "rueidis-cancellable" (a cancellable context). "hedge.Do" runs
// the Client's Hedger around the plain rueidis call, with nothing of
// hedgerueidis in between: hedgerueidis less hedge.Do is the adapter's
// cost, hedge.Do less rueidis-replicas the engine's.
//
//	go test ./hedgerueidis -run '^$' -bench . -benchmem -count 10
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
	plain := func(o rueidis.ClientOption) rueidis.Client {
		rc, err := rueidis.NewClient(o)
		if err != nil {
			b.Fatal(err)
		}
		return rc
	}
	pipelinedOpts := ruOpts[0]
	pipelinedOpts.AlwaysPipelining = true
	ru, rup, ruc := plain(ruOpts[0]), plain(pipelinedOpts), plain(ruOpts[0])
	defer ru.Close()
	defer rup.Close()
	defer ruc.Close()
	seed(b, hr, "k", "v")
	var next atomic.Uint64

	plainGet := func(ctx context.Context, a hedge.Attempt) (rueidis.RedisResult, error) {
		rc := hr.Replica(a.Replica)
		res := rc.Do(ctx, rc.B().Get().Key("k").Build())
		return res, res.Error()
	}

	cases := []struct {
		name string
		get  func() error
	}{
		{"go-redis", func() error { return gr.Replica(0).Get(ctx, "k").Err() }},
		{"hedgeredis", func() error { return gr.Get(ctx, "k").Err() }},
		{"rueidis", func() error { return ru.Do(ctx, ru.B().Get().Key("k").Build()).Error() }},
		{"rueidis-pipelined", func() error { return rup.Do(ctx, rup.B().Get().Key("k").Build()).Error() }},
		{"rueidis-cancellable", func() error { return ruc.Do(cctx, ruc.B().Get().Key("k").Build()).Error() }},
		{"rueidis-replicas", func() error {
			rc := hr.Replica(int(next.Add(1) % uint64(hr.Len())))
			return rc.Do(cctx, rc.B().Get().Key("k").Build()).Error()
		}},
		{"hedge.Do", func() error {
			_, err := hedge.Do(ctx, hr.Hedger(), "GET", plainGet)
			return err
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

// reportCPU starts measuring the process's CPU time and system calls,
// and returns the function that reports them per call.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	calls, ok := syscalls()
	return func() {
		if b.N <= 0 {
			return
		}
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		if now, ok2 := syscalls(); ok && ok2 {
			b.ReportMetric(float64(now-calls)/float64(b.N), "syscalls/op")
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

// syscalls returns the read and write system calls the process made so
// far (syscr and syscw in /proc/self/io), or false where that file is
// not to be had.
func syscalls() (int64, bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	var n int64
	found := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		name, v, _ := strings.Cut(line, ": ")
		if name == "syscr" || name == "syscw" {
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, false
			}
			n += c
			found++
		}
	}
	return n, found == 2
}
