package sim

import (
	"context"
	"testing"
)

func TestSmoke(t *testing.T) {
	for _, w := range []World{Noise, Stalls, BigJobs, Mixed, LogNormal} {
		for _, st := range []Strategy{None, HedgeFixed, HedgeP95Live, HedgeQuietBudget, Tied} {
			for _, ro := range []Routing{TwoChoice, Random, LeastLoaded, Pool} {
				c := DefaultConfig()
				c.World, c.Strategy, c.Routing = w, st, ro
				// A smoke test: it logs, and fails only on an error or
				// a panic, so under the race detector a shorter run
				// exercises the same paths.
				c.Requests = scaled(50000)
				c.Warmup = c.Requests / 10
				c.Load = 0.8
				c.Delay = 2
				s, err := RunPoint(context.Background(), c, 2, 2)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%-9s %-18s %-12s mean %.3f p99 %.3f hedged %.3f extra %.3f util %.3f stalled %.4f delay %.2f multi %.3f",
					w, st, ro, s.Mean.Value, s.P99.Value, s.HedgedFraction.Value, s.ExtraWork.Value, s.Utilisation.Value, s.StalledFraction.Value, s.Delay.Value, s.MultiStarted.Value)
			}
		}
	}
}
