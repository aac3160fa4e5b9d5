package hedgeredis

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/redistest"
)

// BenchmarkGet measures what hedgeredis adds to a GET over loopback when
// hedging is on but never fires (a one-hour delay): plain go-redis against
// hedgeredis, one call at a time, then from parallel goroutines
// (GOMAXPROCS x 8 callers). Besides time per call it reports the client
// process's CPU time per call (cpu-µs/op, user + system from getrusage;
// the servers are other processes), which moves less than wall time on a
// shared machine.
//
//	go test ./hedgeredis -run '^$' -bench . -benchmem -count 5
func BenchmarkGet(b *testing.B) {
	servers := redistest.Start(b, 3)
	c := startClient(b, servers, Config{Hedge: hedge.Config{Delay: hedge.Fixed(time.Hour)}}, nil)
	seed(b, c, func(ctx context.Context, rc *redis.Client) error { return rc.Set(ctx, "k", "v", 0).Err() })
	ctx := context.Background()

	b.Run("go-redis", func(b *testing.B) {
		rc := c.Replica(0)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if err := rc.Get(ctx, "k").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hedgeredis", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if err := c.Get(ctx, "k").Err(); err != nil {
				b.Fatal(err)
			}
		}
		if h := c.Stats().Op("GET").Hedges; h != 0 {
			b.Fatalf("%d hedges fired", h)
		}
	})
	b.Run("go-redis/parallel", func(b *testing.B) {
		rc := c.Replica(0)
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := rc.Get(ctx, "k").Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("hedgeredis/parallel", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Get(ctx, "k").Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		if h := c.Stats().Op("GET").Hedges; h != 0 {
			b.Fatalf("%d hedges fired", h)
		}
	})
}

// reportCPU starts measuring the process's CPU time and returns the
// function that reports it per call.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
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
