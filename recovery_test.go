package hedge_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestStallHedgesComeBackAfterABurst: a burst of slowness on every
// replica at once (a shared host busy, the client's own process starved)
// makes the copies it provokes lose and run many delays, as a share of a
// delay learnt before the burst, and leaves the payoff rule's class so
// far from paying that probes (one in 5,000 requests), each moving its
// averages by a thirty-second, would need dozens of wins to bring it
// back. A probe whose copy wins within half the time its primary had
// waited shows a slow server, not a big request, and starts the class
// over as a new one, which that win makes pay: stall hedges resume at
// the first probe after the burst, about 5,000 requests later. Without
// the restart this test fails: the class comes back, if at all, only as
// probe after probe wins.
//
// Three replicas answer in 0.3 to 1.2 ms; one holds every 25th request
// 80 ms more (a stall). From 10 s to 11 s every request takes 20 ms
// more, on every replica. Requests arrive every 7.5 ms for three
// minutes; each copy's time is a hash of the request's number and the
// copy's, so that it does not hang on the order goroutines run in. The
// test asks that the stalls be hedged before the burst, that the burst
// stop the class (refusals for payoff), and that from 80 to 120 s,
// after the first two probes, the stalls be hedged again.
func TestStallHedgesComeBackAfterABurst(t *testing.T) {
	const (
		every     = 7500 * time.Microsecond
		run       = 3 * time.Minute
		burstFrom = 10 * time.Second
		burstTo   = 11 * time.Second
	)
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		var (
			mu                 sync.Mutex
			hedgedAt           []time.Duration // intended starts of requests that sent a hedge
			stalledAt          []time.Duration // of requests whose primary stalled
			afterBurst, latest hedge.Stats
		)
		synctest.Test(t, func(t *testing.T) {
			defer settle()
			h := mustNew(t, hedge.Config{Replicas: 3})
			start := time.Now()
			var wg sync.WaitGroup
			for i := 0; ; i++ {
				at := time.Duration(i) * every
				if at >= run {
					break
				}
				time.Sleep(time.Until(start.Add(at)))
				if at == 30*time.Second {
					afterBurst = h.OpStats("get")
				}
				wg.Go(func() {
					var hedges atomic.Int32
					_, _ = hedge.Do(context.Background(), h, "get", func(ctx context.Context, a hedge.Attempt) (int, error) {
						if a.Hedge {
							hedges.Add(1)
						}
						u := mix(seed, uint64(i), uint64(a.Index))
						d := 300*time.Microsecond + time.Duration(u%900)*time.Microsecond
						if a.Replica == 2 && (u>>20)%25 == 0 {
							d += 80 * ms
							if a.Index == 0 {
								mu.Lock()
								stalledAt = append(stalledAt, at)
								mu.Unlock()
							}
						}
						if now := time.Since(start); now >= burstFrom && now < burstTo {
							d += 20 * ms
						}
						select {
						case <-time.After(d):
							return 1, nil
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					})
					if hedges.Load() > 0 {
						mu.Lock()
						hedgedAt = append(hedgedAt, at)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			latest = h.OpStats("get")
		})
		count := func(ts []time.Duration, from, to time.Duration) (n int) {
			for _, x := range ts {
				if x >= from && x < to {
					n++
				}
			}
			return n
		}
		before, after := count(hedgedAt, 2*time.Second, burstFrom), count(hedgedAt, 80*time.Second, 120*time.Second)
		stalledBefore, stalledAfter := count(stalledAt, 2*time.Second, burstFrom), count(stalledAt, 80*time.Second, 120*time.Second)
		var win string
		for w := time.Duration(0); w < run; w += 10 * time.Second {
			win += fmt.Sprintf(" %d/%d", count(hedgedAt, w, w+10*time.Second), count(stalledAt, w, w+10*time.Second))
		}
		t.Logf("seed %d windows:%s", seed, win)
		t.Logf("seed %d: hedged %d of %d stalled before the burst, %d from 15 s to 30 s, %d of %d stalled from 80 s to 120 s; refused for payoff: %d by 30 s, %d in all",
			seed, before, stalledBefore, count(hedgedAt, 15*time.Second, 30*time.Second), after, stalledAfter, afterBurst.Refused[hedge.RefusedPayoff], latest.Refused[hedge.RefusedPayoff])
		if before < stalledBefore/2 {
			t.Errorf("seed %d: %d requests hedged before the burst, against %d stalled primaries: the stalls are not hedged to begin with", seed, before, stalledBefore)
		}
		if afterBurst.Refused[hedge.RefusedPayoff] == 0 {
			t.Errorf("seed %d: the burst did not stop the class (no payoff refusal by 30 s): the test no longer shows what it is for", seed)
		}
		if after < stalledAfter/2 {
			t.Errorf("seed %d: %d requests hedged from 80 s to 120 s, against %d stalled primaries: the burst switched stall hedges off", seed, after, stalledAfter)
		}
	}
}

// mix hashes three numbers to one (splitmix64's finaliser).
func mix(a, b, c uint64) uint64 {
	x := a*0x9E3779B97F4A7C15 ^ b*0xC2B2AE3D27D4EB4F ^ c*0x165667B19E3779F9
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}
