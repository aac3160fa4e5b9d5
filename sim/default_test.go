package sim

import (
	"flag"
	"fmt"
	"math"
	"testing"

	"github.com/tailcut/hedge"
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
	// a new Hedger learns from its first hedges of each class and its
	// first thousand placements, and much shorter runs weigh that
	// transient more than a service that runs for hours would. The
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

var alternatives = flag.Bool("alternatives", false, "run TestDefaultAlternatives: the default's rules one by one over a reduced grid (about a minute)")

// TestDefaultAlternatives measures the zero Config's rules one by one, the
// table of docs/default.md ("How the rules were chosen"):
//
//	go test ./sim -run TestDefaultAlternatives -alternatives -v
//
// It prints, for each variant, every ratio to none above 1.03 and the
// worst ratio to none of p50, p99 or p99.9 over seven worlds at loads 0.3 to 0.9 (3 runs of 300,000 requests
// per point), and the gains at the points the goals name. It asserts
// nothing: it is the measurement behind a choice, kept so that it can be
// repeated.
func TestDefaultAlternatives(t *testing.T) {
	if !*alternatives {
		t.Skip("a measurement, not a test: run with -alternatives")
	}
	variants := []struct {
		name      string
		cfg       hedge.Config
		placement int // Config.placement: another place for the copy
	}{
		{"plain live p95 with the budget (MaxReplicaLoad AnyReplicaLoad, MinWinRate -1)", hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, MinWinRate: -1}, 0},
		{"spare capacity only (MinWinRate -1)", hedge.Config{MinWinRate: -1}, 0},
		{"payoff only (MaxReplicaLoad AnyReplicaLoad)", hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad}, 0},
		{"the default", hedge.Config{}, 0},
		{"the default, one request in flight allowed (MaxReplicaLoad 1)", hedge.Config{MaxReplicaLoad: 1}, 0},
		{"the default, the copy on the least loaded of all replicas", hedge.Config{}, placeLeastOfAll},
		{"the default, the copy on the least loaded of four", hedge.Config{}, placeLeastOfFour},
		{"the default, the least loaded of all while two replicas are idle", hedge.Config{}, placeKeepOneIdle},
		{"the default, the least loaded of all for a primary stuck behind (Behind)", hedge.Config{}, placeLeastForBehind},
		{"the default, the least loaded of all while at least 35% of primaries find their replica idle", hedge.Config{}, placeLeastWhenSpare - 35},
		{"the default, the least loaded of all while at least 45% of primaries find their replica idle", hedge.Config{}, placeLeastWhenSpare - 45},
		{"the default, the least loaded of all for Behind while at least 30% of primaries find their replica idle", hedge.Config{}, placeBehindWhenSpare - 30},
	}
	worlds := []string{"noise", "stalls", "bigjobs", "mixed", "correlated", "ps-stalls", "ps-bigjobs"}
	loads := []float64{0.3, 0.5, 0.7, 0.8, 0.9}
	const runs, reqs = 3, 300_000
	type key struct {
		world string
		load  float64
	}
	point := func(world string, load float64, s Strategy, h *hedge.Config, placement int) Summary {
		c := DefaultConfig()
		for _, sc := range DefaultScenarios {
			if sc.Name == world {
				sc.Apply(&c)
			}
		}
		c.Load, c.Requests, c.Warmup, c.Strategy, c.Hedge, c.placement = load, reqs, reqs/10, s, h, placement
		c.Seed = DeriveSeed(7, fmt.Sprint(world, load))
		return runPoint(t, c, runs)
	}
	none := map[key]Summary{}
	for _, w := range worlds {
		for _, l := range loads {
			none[key{w, l}] = point(w, l, None, nil, 0)
		}
	}
	ratio := func(a, b Summary, f func(*RunResult) float64) Estimate {
		xs, ys := make([]float64, len(a.Runs)), make([]float64, len(b.Runs))
		for i := range a.Runs {
			xs[i], ys[i] = f(&a.Runs[i]), f(&b.Runs[i])
		}
		return Ratio(xs, ys)
	}
	p50 := func(r *RunResult) float64 { return r.P50 }
	p99 := func(r *RunResult) float64 { return r.P99 }
	p999 := func(r *RunResult) float64 { return r.P999 }
	t.Logf("| policy | worst ratio (where) | stalls p99.9 at 0.3 / 0.5 / 0.7 | noise p99 at 0.3 / 0.5 / 0.7 |")
	for _, v := range variants {
		worst, where := 0.0, ""
		gain := map[key]float64{}
		for _, w := range worlds {
			for _, l := range loads {
				cfg := v.cfg
				s := point(w, l, Default, &cfg, v.placement)
				n := none[key{w, l}]
				for _, q := range []struct {
					name string
					f    func(*RunResult) float64
				}{{"p50", p50}, {"p99", p99}, {"p99.9", p999}} {
					if e := ratio(s, n, q.f); e.Value > 1.03 {
						t.Logf("   %s: %s %s at %g: %.3f ± %.3f", v.name, w, q.name, l, e.Value, e.SE)
					}
					if e := ratio(s, n, q.f); e.Value > worst {
						worst, where = e.Value, fmt.Sprintf("%s %s at %g, ± %.3f", w, q.name, l, e.SE)
					}
				}
				switch w {
				case "stalls":
					gain[key{w, l}] = ratio(s, n, p999).Value
				case "noise":
					gain[key{w, l}] = ratio(s, n, p99).Value
				}
			}
		}
		t.Logf("| %s | %.3f (%s) | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |", v.name, worst, where,
			gain[key{"stalls", 0.3}], gain[key{"stalls", 0.5}], gain[key{"stalls", 0.7}],
			gain[key{"noise", 0.3}], gain[key{"noise", 0.5}], gain[key{"noise", 0.7}])
	}

	// The learning transient: the same default, measured from a new
	// Hedger's first request, after a short warm-up (2,500 requests) and
	// after the usual one, 22,500 measured requests each.
	for _, wl := range []key{{"bigjobs", 0.7}, {"mixed", 0.8}, {"bigjobs", 0.9}} {
		for _, warm := range []int{0, 2_500, 20_000} {
			mk := func(s Strategy) Summary {
				c := DefaultConfig()
				for _, sc := range DefaultScenarios {
					if sc.Name == wl.world {
						sc.Apply(&c)
					}
				}
				c.Load, c.Requests, c.Warmup, c.Strategy = wl.load, warm+22_500, warm, s
				c.Seed = DeriveSeed(8, fmt.Sprint(wl.world, wl.load))
				return runPoint(t, c, 8)
			}
			e := ratio(mk(Default), mk(None), p50)
			t.Logf("learning transient: %s at %g, warm-up %d then 22,500 measured: default's p50 %.3f ± %.3f of none's", wl.world, wl.load, warm, e.Value, e.SE)
		}
	}
}
