package hedge_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
)

// TestWithFanOut sends fan-outs of 40 leaves over 4 replicas, one every
// 100 ms, each with one straggler (50 ms; the others take 1 ms), through
// the zero Config's rules with a 10 ms delay. Each replica gets about ten
// leaves at once, so without the mark nine primaries in ten find their
// replica holding this client's requests: the spare share falls below a
// quarter after some fifty fan-outs, and the stragglers' hedges are
// refused as busy from then on. With WithFanOut, a replica that holds
// only the same fan-out's leaves is idle for that rule, and every
// straggler is hedged (to a replica whose leaves are done by then).
func TestWithFanOut(t *testing.T) {
	const fanouts, leaves = 100, 40
	run := func(t *testing.T, mark bool) hedge.Stats {
		var st hedge.Stats
		synctest.Test(t, func(t *testing.T) {
			h := mustNew(t, hedge.Config{Replicas: 4, Delay: hedge.Fixed(10 * time.Millisecond)})
			for range fanouts {
				ctx := context.Background()
				if mark {
					ctx = hedge.WithFanOut(ctx)
				}
				var wg sync.WaitGroup
				for j := range leaves {
					wg.Go(func() {
						_, err := hedge.Do(ctx, h, "leaf", func(ctx context.Context, a hedge.Attempt) (int, error) {
							d := time.Millisecond
							if j == 0 && a.Index == 0 {
								d = 50 * time.Millisecond
							}
							select {
							case <-time.After(d):
								return j, nil
							case <-ctx.Done():
								return 0, ctx.Err()
							}
						})
						if err != nil {
							t.Errorf("leaf %d: %v", j, err)
						}
					})
				}
				wg.Wait()
				time.Sleep(100 * time.Millisecond)
			}
			st = h.OpStats("leaf")
			time.Sleep(time.Second) // the Hedger's timer goroutine lingers
		})
		return st
	}
	plain := run(t, false)
	marked := run(t, true)
	t.Logf("without the mark: %d hedges, %d refused as busy; with it: %d hedges, %d refused as busy", plain.Hedges, plain.Refused[hedge.RefusedBusy], marked.Hedges, marked.Refused[hedge.RefusedBusy])
	if plain.Refused[hedge.RefusedBusy] == 0 || plain.Hedges > fanouts*3/4 {
		t.Errorf("without WithFanOut: %d hedges and %d refused as busy; want the spare-capacity rule to stop most of them", plain.Hedges, plain.Refused[hedge.RefusedBusy])
	}
	if marked.Hedges < fanouts*9/10 || marked.Refused[hedge.RefusedBusy] != 0 {
		t.Errorf("with WithFanOut: %d hedges of %d stragglers, %d refused as busy; want every straggler hedged", marked.Hedges, fanouts, marked.Refused[hedge.RefusedBusy])
	}
}
