package hedge_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tailcut/hedge"
)

// BenchmarkTimerLateness measures how late hedges are sent: for each call
// the primary waits for cancellation, and the hedge notes how long after
// the call's start it began, minus the delay. It reports the p50, p99 and
// max lateness in microseconds. Wall-clock, so it is a benchmark, not a
// test: run it on a quiet machine.
func BenchmarkTimerLateness(b *testing.B) {
	for _, d := range []time.Duration{200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		for _, precise := range []bool{false, true} {
			b.Run(fmt.Sprintf("delay=%v/precise=%v", d, precise), func(b *testing.B) {
				h, _ := hedge.New(hedge.Config{Delay: hedge.Fixed(d), NoBudget: true, PreciseTimers: precise})
				late := make([]time.Duration, 0, b.N)
				cpu0 := cpuTime()
				for b.Loop() {
					start := time.Now()
					hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
						if a.Index == 0 {
							<-ctx.Done()
							return 0, ctx.Err()
						}
						late = append(late, time.Since(start)-d)
						return 1, nil
					})
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
				slices.Sort(late)
				q := func(p float64) float64 {
					return float64(late[int(p*float64(len(late)-1))]) / 1e3
				}
				b.ReportMetric(q(0.5), "p50-late-µs")
				b.ReportMetric(q(0.99), "p99-late-µs")
				b.ReportMetric(q(1), "max-late-µs")
			})
		}
	}
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestPreciseTimers checks that the spinning timer queue sends hedges and
// lets its goroutine go (goleak checks at the end of the package's tests).
// It runs on the wall clock: spinning never blocks, so it cannot run in a
// synctest bubble. It asserts behaviour only, never timing.
func TestPreciseTimers(t *testing.T) {
	h := mustNew(t, hedge.Config{Delay: hedge.Fixed(300 * time.Microsecond), NoBudget: true, PreciseTimers: true})
	for range 20 {
		v, err := hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
			if a.Index == 0 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 2, nil
		})
		if v != 2 || err != nil {
			t.Fatalf("Do = %d, %v; want the hedge's 2", v, err)
		}
	}
	if st := h.OpStats("op"); st.Hedges != 20 || st.HedgeWins != 20 {
		t.Fatalf("hedges %d, wins %d; want 20, 20", st.Hedges, st.HedgeWins)
	}
}
