package hedge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/quantile"
)

// TestHistogramsMatchStats runs hedged calls with a partial rollout and
// checks that the bucket counts of every latency histogram agree with the
// Distributions of Stats: the same count and sum, and the quantiles of
// Stats are the midpoints of the buckets holding their ranks.
func TestHistogramsMatchStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer settle()
		h := mustNew(t, hedge.Config{Delay: hedge.Fixed(10 * ms), NoBudget: true})
		if err := h.SetRollout(0.5); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			s := newScript(behaviour{after: time.Duration(20+i%7) * ms, val: 1}, behaviour{after: 5 * ms, val: 2})
			hedge.Do(context.Background(), h, "op", s.attempt)
		}
		hedge.Do(context.Background(), h, "other", newScript(behaviour{after: 2 * ms, val: 1}).attempt)

		all := h.Histograms()
		if len(all) != 2 || all[0].Op != "op" || all[1].Op != "other" {
			t.Fatalf("Histograms: %d classes %v, want op and other", len(all), all)
		}
		st := h.OpStats("op")
		hs := all[0]
		if st.Holdout.Count == 0 || st.HedgePath.Count == 0 {
			t.Fatalf("workload missed the holdout or the hedge path: %v", st)
		}
		for _, p := range []struct {
			name string
			d    hedge.Distribution
			c    quantile.Counts
		}{
			{"latency", st.Latency, hs.Latency},
			{"primary", st.Primary, hs.Primary},
			{"hedge path", st.HedgePath, hs.HedgePath},
			{"holdout", st.Holdout, hs.Holdout},
		} {
			if p.c.Count != uint64(p.d.Count) || p.c.Sum != int64(p.d.Sum) {
				t.Errorf("%s: histogram count %d sum %d, Stats %d and %d", p.name, p.c.Count, p.c.Sum, p.d.Count, p.d.Sum)
			}
			for _, q := range []struct {
				q    float64
				want time.Duration
			}{{0.5, p.d.P50}, {0.9, p.d.P90}, {0.99, p.d.P99}} {
				r := uint64(quantile.Rank(q.q, int(p.c.Count)))
				var seen uint64
				for _, b := range p.c.Buckets {
					if seen += b.Count; seen >= r {
						if got := min(time.Duration(b.Mid()), p.d.Max); got != q.want {
							t.Errorf("%s q%v: bucket midpoint %v, Stats %v", p.name, q.q, got, q.want)
						}
						break
					}
				}
			}
		}
	})
}
