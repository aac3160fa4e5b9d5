package sim

import (
	"fmt"
	"math"
	"testing"
)

// TestDefaultNeverWorse runs the library's zero hedge.Config (strategy
// default) against no hedging at the points of the default group's grid
// where it came nearest to doing harm, with fewer requests than the
// study, and fails if its p50, p99 or p99.9 is worse than none's beyond
// what the study's rule allows: a ratio above 1.05, or above 1 by more
// than two standard errors of the paired ratio where those are larger
// (the test computes them from its own runs). It also checks that the default still gains where hedging
// pays, so that never hedging could not pass it.
func TestDefaultNeverWorse(t *testing.T) {
	// Runs are never shorter than 200,000 requests (20,000 of warm-up):
	// a new Hedger's payoff rule starts optimistic and learns from its
	// first few dozen hedges of each class, and much shorter runs weigh
	// that transient more than a service that runs for hours would. The
	// simulator is deterministic, so a run under the race detector
	// measures what it measures without; it is slower, so there only the
	// points nearest the bound and one gain are run.
	reqs, warmup := 200_000, 20_000
	type point struct {
		scenario string
		load     float64
	}
	worst := []point{
		{"stalls", 0.5}, {"bigjobs", 0.7}, {"bigjobs", 0.8}, {"mixed", 0.8}, {"mixed", 0.9},
		{"correlated", 0.5}, {"ps-stalls", 0.7}, {"ps-bigjobs", 0.8}, {"noise", 0.3},
		{"lognormal σ=0.5", 0.7},
	}
	// Gains the default must keep: the ratio of the percentile, less two
	// standard errors, at most bound.
	gains := []struct {
		point
		pct   string
		bound float64
	}{
		{point{"stalls", 0.3}, "p99.9", 0.4},
		{point{"noise", 0.3}, "p99", 0.9},
		{point{"bigjobs", 0.5}, "p99", 0.85},
	}
	if raceEnabled {
		worst = []point{{"bigjobs", 0.8}, {"mixed", 0.8}, {"correlated", 0.5}}
		gains = gains[:1]
	}
	scenario := func(name string) DefaultScenario {
		for _, sc := range DefaultScenarios {
			if sc.Name == name {
				return sc
			}
		}
		t.Fatalf("no scenario %q", name)
		return DefaultScenario{}
	}
	ratios := func(p point) map[string]Estimate {
		c := DefaultConfig()
		scenario(p.scenario).Apply(&c)
		c.Load, c.Requests, c.Warmup = p.load, reqs, warmup
		c.Seed = DeriveSeed(99, fmt.Sprint(p.scenario, p.load))
		n, d := c, c
		n.Strategy, d.Strategy = None, Default
		sn := runPoint(t, n, 4)
		sd := runPoint(t, d, 4)
		col := func(s Summary, f func(*RunResult) float64) []float64 {
			xs := make([]float64, len(s.Runs))
			for i := range s.Runs {
				xs[i] = f(&s.Runs[i])
			}
			return xs
		}
		out := map[string]Estimate{}
		for _, q := range []struct {
			name string
			f    func(*RunResult) float64
		}{{"p50", func(r *RunResult) float64 { return r.P50 }}, {"p99", func(r *RunResult) float64 { return r.P99 }}, {"p99.9", func(r *RunResult) float64 { return r.P999 }}} {
			out[q.name] = Ratio(col(sd, q.f), col(sn, q.f))
		}
		return out
	}
	for _, p := range worst {
		r := ratios(p)
		for _, q := range []string{"p50", "p99", "p99.9"} {
			e := r[q]
			if math.IsNaN(e.Value) || e.Value > 1+max(0.05, 2*e.SE) {
				t.Errorf("%s at load %g: default's %s is %.3f ± %.3f of none's: worse than not hedging", p.scenario, p.load, q, e.Value, e.SE)
				continue
			}
			t.Logf("%s at load %g: %s ratio %.3f ± %.3f", p.scenario, p.load, q, e.Value, e.SE)
		}
	}
	for _, g := range gains {
		e := ratios(g.point)[g.pct]
		if math.IsNaN(e.Value) || e.Value-2*e.SE > g.bound {
			t.Errorf("%s at load %g: default's %s is %.3f ± %.3f of none's, want at most %g: the gain is gone", g.scenario, g.load, g.pct, e.Value, e.SE, g.bound)
			continue
		}
		t.Logf("%s at load %g: %s ratio %.3f ± %.3f (gain kept)", g.scenario, g.load, g.pct, e.Value, e.SE)
	}
}
