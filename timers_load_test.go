package hedge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

// BenchmarkTimerLoad measures what precise timers cost under steady
// traffic, with their lateness: an open-loop load of 10,000 calls per
// second for 3 s, each arriving at its scheduled time, with a fixed
// sub-millisecond delay; 5% of primaries stall for 5 ms and are hedged,
// and hedges answer at once. The other 95% answer at once (hold=0: their
// timers are removed long before they are due), or after 10-90% of the
// delay on a runtime timer (hold=timer: their hedge timers stay queued,
// and a queue that spins while any timer is near spins nearly all the
// time; but the runtime timer ends these primaries up to a millisecond
// late, behind precise hedge timers, so they hedge far more than 5%). It reports the process's CPU use as a share of
// one core (core-%: the load generator and the calls included, so the
// cost of precision is the difference between the precise=true and
// precise=false rows of one delay) and the hedges' lateness against the
// delay. Wall-clock: a benchmark, run on a quiet machine, with
//
//	go test -run '^$' -bench TimerLoad -benchtime 1x -count 3 .
func BenchmarkTimerLoad(b *testing.B) {
	const (
		rate     = 10000
		duration = 3 * time.Second
	)
	for _, hold := range []string{"0", "timer"} {
		for _, d := range []time.Duration{200 * time.Microsecond, 500 * time.Microsecond} {
			for _, precise := range []bool{false, true} {
				b.Run(fmt.Sprintf("hold=%s/delay=%v/precise=%v", hold, d, precise), func(b *testing.B) {
					h, err := hedge.New(hedge.Config{Delay: hedge.Fixed(d), NoBudget: true, PreciseTimers: precise,
						MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1})
					if err != nil {
						b.Fatal(err)
					}
					var (
						mu   sync.Mutex
						late []time.Duration
						wg   sync.WaitGroup
					)
					rng := rand.New(rand.NewPCG(1, 2))
					call := func(stall time.Duration) {
						defer wg.Done()
						start := time.Now()
						_, _ = hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
							if a.Index > 0 {
								l := time.Since(start) - d
								mu.Lock()
								late = append(late, l)
								mu.Unlock()
								return 1, nil
							}
							if stall == 0 {
								return 0, nil
							}
							t := time.NewTimer(stall)
							defer t.Stop()
							select {
							case <-t.C:
								return 0, nil
							case <-ctx.Done():
								return 0, ctx.Err()
							}
						})
					}
					for b.Loop() {
						late = late[:0]
						n := int(rate * duration.Seconds())
						cpu0, t0 := cpuTime(), time.Now()
						for sent := 0; sent < n; {
							due := min(int(time.Since(t0).Seconds()*rate), n)
							for ; sent < due; sent++ {
								stall := 5 * time.Millisecond
								if rng.Float64() < 0.95 {
									stall = 0
									if hold == "timer" {
										stall = time.Duration((0.1 + 0.8*rng.Float64()) * float64(d))
									}
								}
								wg.Add(1)
								go call(stall)
							}
							time.Sleep(100 * time.Microsecond)
						}
						wg.Wait()
						wall := time.Since(t0)
						b.ReportMetric(100*float64(cpuTime()-cpu0)/float64(wall), "core-%")
					}
					mu.Lock()
					defer mu.Unlock()
					if len(late) == 0 {
						b.Fatal("no hedge fired")
					}
					slices.Sort(late)
					q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))]) / 1e3 }
					b.ReportMetric(float64(len(late)), "hedges")
					b.ReportMetric(q(0.5), "p50-late-µs")
					b.ReportMetric(q(0.99), "p99-late-µs")
				})
			}
		}
	}
}
