package hedge_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestHoldoutMatchesUnhedged checks that the rollout's control group is
// what the same traffic gets without hedging: three one-worker FIFO
// servers, each frozen for 200 ms every 4 s in turn, an open-loop arrival
// stream at about two thirds of their capacity, and copies that leave the
// queue when cancelled, as an HTTP client's do. Stats.Holdout at a
// rollout of 0.9 must agree with Stats.Latency of a Hedger that never
// hedges (MaxAttempts 1) on the same arrivals, within the noise of a
// control group of a tenth of the calls. The control group is placed by
// what a client that never hedges would see: placed by the hedged
// traffic's load, where cancelled copies leave a stalled replica looking
// idle a few delays later, its p99 came out up to 3.5 times the
// unhedged one. What is left is the servers' own state: hedging drains a
// stalled replica's queue, and the control group's mean and p99 come out
// 0.75 to 1.0 of the unhedged ones.
func TestHoldoutMatchesUnhedged(t *testing.T) {
	const n = 40000
	run := func(t *testing.T, cfg hedge.Config, rollout float64) hedge.Stats {
		var st hedge.Stats
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, cfg)
			if err := h.SetRollout(rollout); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var worker [3]chan struct{}
			for i := range worker {
				worker[i] = make(chan struct{}, 1)
				worker[i] <- struct{}{}
			}
			frozen := func(r int, at time.Time) time.Duration {
				off := at.Sub(start) % (4 * time.Second)
				from := time.Duration(r) * 1300 * ms
				if off >= from && off < from+200*ms {
					return from + 200*ms - off
				}
				return 0
			}
			serve := func(ctx context.Context, a hedge.Attempt, work time.Duration) (int, error) {
				select {
				case <-worker[a.Replica]:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
				defer func() { worker[a.Replica] <- struct{}{} }()
				select {
				case <-time.After(frozen(a.Replica, time.Now()) + work):
					return 1, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var wg sync.WaitGroup
			for range n {
				time.Sleep(time.Duration(rng.ExpFloat64() * float64(ms) / 2))
				work := time.Duration(rng.ExpFloat64() * float64(ms))
				wg.Add(1)
				go func() {
					defer wg.Done()
					hedge.Do(context.Background(), h, "op", func(ctx context.Context, a hedge.Attempt) (int, error) {
						return serve(ctx, a, work)
					})
				}()
			}
			wg.Wait()
			st = h.OpStats("op")
		})
		return st
	}
	held := run(t, hedge.Config{Replicas: 3}, 0.9)
	none := run(t, hedge.Config{Replicas: 3, MaxAttempts: 1}, 1)
	t.Logf("holdout %v\nhedged and holdout %v\nunhedged %v", held.Holdout, held.Latency, none.Latency)
	if held.Hedges == 0 || held.Holdout.Count < n/20 {
		t.Fatalf("%d hedges, %d calls held out: the run hedged nothing or held out too few", held.Hedges, held.Holdout.Count)
	}
	for _, q := range []struct {
		name      string
		got, want time.Duration
		tol       float64
	}{
		{"mean", held.Holdout.Mean, none.Latency.Mean, 0.35},
		{"p50", held.Holdout.P50, none.Latency.P50, 0.15},
		{"p90", held.Holdout.P90, none.Latency.P90, 0.15},
		{"p99", held.Holdout.P99, none.Latency.P99, 0.3},
	} {
		if r := float64(q.got) / float64(q.want); r < 1-q.tol || r > 1+q.tol {
			t.Errorf("holdout %s %v against %v unhedged: ratio %.2f, want within %.0f%%", q.name, q.got, q.want, r, 100*q.tol)
		}
	}
}
