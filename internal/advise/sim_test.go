package advise

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/sim"
)

// worldScript draws n requests of world w at load on 10 servers: Poisson
// arrivals, and sizes as the world draws them (Exp(1), or the
// hyperexponential with SCV 10 for bigjobs), one per request.
func worldScript(w sim.World, load float64, n int, seed uint64) sim.Script {
	r := rand.New(rand.NewPCG(seed, 77))
	p1, r1, r2 := sim.H2Params(10)
	reqs := make([]sim.ScriptedRequest, n)
	t := 0.0
	for i := range reqs {
		t += r.ExpFloat64() / (load * 10)
		x := r.ExpFloat64()
		if w == sim.BigJobs {
			if r.Float64() < p1 {
				x /= r1
			} else {
				x /= r2
			}
		}
		reqs[i] = sim.ScriptedRequest{At: t, Sizes: []float64{x}}
	}
	return sim.Script{Requests: reqs}
}

// simLatencies returns the latency of every request of world w run
// unhedged on sc, in simulated units, as the simulator reports each
// completion (Simulator.Done).
func simLatencies(t *testing.T, w sim.World, load float64, sc sim.Script, seed uint64) []float64 {
	t.Helper()
	c := sim.DefaultConfig()
	c.World, c.Load, c.Seed = w, load, seed
	out := make([]float64, 0, len(sc.Requests))
	s := sim.Simulator{Done: func(cp sim.Completion) { out = append(out, cp.Latency) }}
	if _, err := s.RunScript(c, sc); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(sc.Requests) {
		t.Fatalf("%d completions for %d requests", len(out), len(sc.Requests))
	}
	return out
}

// TestSimLatenciesRecovered checks simLatencies: the latencies it collects
// have the simulator's own percentiles for the same unhedged run.
func TestSimLatenciesRecovered(t *testing.T) {
	sc := worldScript(sim.Stalls, 0.5, 5000, 3)
	lat := simLatencies(t, sim.Stalls, 0.5, sc, 3)
	c := sim.DefaultConfig()
	c.World, c.Load, c.Seed = sim.Stalls, 0.5, 3
	var s sim.Simulator
	res, err := s.RunScript(c, sc)
	if err != nil {
		t.Fatal(err)
	}
	xs := newEmpirical(sortedCopy(lat))
	for _, q := range []struct {
		p    float64
		want float64
	}{{0.5, res.P50}, {0.99, res.P99}, {0.999, res.P999}} {
		if got := quantileOf(xs.xs, q.p); math.Abs(got/q.want-1) > 1e-3 {
			t.Errorf("recovered p%g = %.5g, simulator says %.5g", 100*q.p, got, q.want)
		}
	}
}

func sortedCopy(xs []float64) []float64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

// TestAgainstSimulatorWorlds samples each of the simulator's worlds
// unhedged, asks advise what hedging at the sample's p90 and p99 would do
// (with and without the default budget), and runs the simulator's own
// world with the same hedge.Config. The tolerances, on ratios to no
// hedging and on shares, are what each estimate promises in each world:
//
//   - noise (fresh Exp(1) work per copy, load 0.2), the world the
//     independent estimate describes: it and the fresh queueing estimate
//     are within 0.03 (fresh: 0.04) of the measured p50 ratio, 0.06 of the
//     p99 ratio, 0.12 of the p99.9 ratio, 1.5 (fresh: 2.5) points of hedge
//     rate and 2 points of extra work. (The fresh estimate takes the
//     sample, waiting included, as service times: it hedges a little more.)
//   - bigjobs (hyperexponential sizes shared by copies, load 0.3), where
//     the slowness lives in the requests: the shared queueing estimate is
//     within 0.12 of the p50 ratio, 0.2 of the p99 ratio, 0.1 of the
//     p99.9 ratio, 10 points of hedge rate and 13 points of extra work;
//     the independent estimate promises a p99 ratio under half the
//     measured one at the p90 (its assumption fails here). The shared
//     estimate's errors are biases, not noise: over five seeds at these
//     sizes its worst were +0.09 (p50), -0.15 (p99, hedging at the p99,
//     where it promises 0.9 and the world gives 1.0), -0.03 (p99.9), +7.6
//     points of hedge rate and +10 of work.
//   - stalls (load 0.3): copies escape their server's stall but share
//     their Exp(1) size, which no estimate models. The independent and
//     fresh estimates get the hedge rate within 2 points and are
//     optimistic: their p99 and p99.9 ratios are at most the measured
//     ones, by at most 0.45, and where they promise to halve the p99.9 the
//     world does too. (Extra work is not compared: the simulator counts
//     the work a stalled server gets done, not the time it is busy.)
//     The stalled estimate (queue-stalls), which fits stopping servers
//     to the sample, is within 0.05 of the p50 ratio, 2 points of hedge
//     rate, and 0.06 of the p99.9 ratio without the budget (0.2 with it,
//     where it is pessimistic); its p99 ratio is optimistic, by at most
//     0.4, as the others' are (the world's copies share their size, and
//     its stalled servers slow down 20-fold where the fit's stop). Over
//     six seeds of the sample and of advise's simulation (11 to 16) at
//     these sizes its worst errors were -0.035 (p50), -0.30 (p99), +0.14
//     (p99.9 with the budget, at the p90), -0.05 (p99.9 without it) and
//     +1.5 points of hedge rate.
func TestAgainstSimulatorWorlds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator for a few seconds")
	}
	if raceEnabled {
		t.Skip("runs without the race detector (scripts/test runs it so): under it the simulator is thirty times slower")
	}
	// Samples large enough that each ratio's sampling error is well
	// inside its tolerance: at a quarter of these sizes a p99.9 rests on
	// a dozen requests, and the bigjobs p99.9 ratio moved by 0.13 from
	// one seed to another.
	n, simN := 48000, 120000
	type check func(t *testing.T, kind string, pred, meas Outcome)
	within := func(t *testing.T, what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s: predicted %.3f, measured %.3f: beyond %.3g", what, got, want, tol)
		}
	}
	close := func(p50, p99, p999, rate, work float64) check {
		return func(t *testing.T, kind string, o, m Outcome) {
			t.Helper()
			within(t, kind+" p50 ratio", o.P50Ratio, m.P50Ratio, p50)
			within(t, kind+" p99 ratio", o.P99Ratio, m.P99Ratio, p99)
			within(t, kind+" p99.9 ratio", o.P999Ratio, m.P999Ratio, p999)
			within(t, kind+" hedge rate", o.HedgeRate, m.HedgeRate, rate)
			within(t, kind+" extra work", o.ExtraWork, m.ExtraWork, work)
		}
	}
	optimistic := func(t *testing.T, kind string, o, m Outcome) {
		t.Helper()
		within(t, kind+" hedge rate", o.HedgeRate, m.HedgeRate, 0.02)
		for _, r := range []struct {
			what       string
			pred, meas float64
		}{{"p99", o.P99Ratio, m.P99Ratio}, {"p99.9", o.P999Ratio, m.P999Ratio}} {
			if !(r.pred <= r.meas+0.02 && r.meas-r.pred <= 0.45) {
				t.Errorf("%s %s ratio: predicted %.3f, measured %.3f: expected an optimistic estimate within 0.45", kind, r.what, r.pred, r.meas)
			}
		}
		if o.P999Ratio < 0.5 && !(m.P999Ratio < 0.5) {
			t.Errorf("%s: predicted p99.9 ratio %.3f, measured %.3f: the predicted halving did not happen", kind, o.P999Ratio, m.P999Ratio)
		}
	}
	stalled := func(t *testing.T, kind string, o, m Outcome) {
		t.Helper()
		within(t, kind+" p50 ratio", o.P50Ratio, m.P50Ratio, 0.05)
		within(t, kind+" hedge rate", o.HedgeRate, m.HedgeRate, 0.02)
		if o.Budget {
			within(t, kind+" p99.9 ratio", o.P999Ratio, m.P999Ratio, 0.2)
		} else {
			within(t, kind+" p99.9 ratio", o.P999Ratio, m.P999Ratio, 0.06)
		}
		if !(o.P99Ratio <= m.P99Ratio+0.02 && m.P99Ratio-o.P99Ratio <= 0.4) {
			t.Errorf("%s p99 ratio: predicted %.3f, measured %.3f: expected an optimistic estimate within 0.4", kind, o.P99Ratio, m.P99Ratio)
		}
	}
	worlds := []struct {
		w      sim.World
		load   float64
		checks map[string]check // prediction kind -> its check
	}{
		{sim.Noise, 0.2, map[string]check{
			"independent": close(0.03, 0.06, 0.12, 0.015, 0.02),
			"queue-fresh": close(0.04, 0.06, 0.12, 0.025, 0.02),
		}},
		{sim.BigJobs, 0.3, map[string]check{
			"queue-shared": close(0.12, 0.2, 0.1, 0.1, 0.13),
		}},
		{sim.Stalls, 0.3, map[string]check{
			"independent":  optimistic,
			"queue-fresh":  optimistic,
			"queue-stalls": stalled,
		}},
	}
	for _, wc := range worlds {
		t.Run(wc.w.String(), func(t *testing.T) {
			sc := worldScript(wc.w, wc.load, n, 11)
			lat := simLatencies(t, wc.w, wc.load, sc, 11)
			s := &Sample{Source: "sim " + wc.w.String()}
			for _, x := range lat {
				s.Latencies = append(s.Latencies, time.Duration(x*float64(sim.Unit)))
			}
			rep, err := Advise(context.Background(), s, Options{Percentiles: []float64{90, 99}, Load: wc.load, Servers: 10, Requests: simN})
			if err != nil {
				t.Fatal(err)
			}
			if wc.w == sim.Stalls && rep.Stalls == nil {
				t.Error("no stalls fitted to the stalls world's sample")
			}
			base := measureWorld(t, wc.w, wc.load, nil)
			for ci, ch := range rep.Choices {
				for bi, budget := range []bool{false, true} {
					cfg := ch.Config(budget)
					m := measureWorld(t, wc.w, wc.load, &cfg)
					mo := Outcome{HedgeRate: m.HedgedFraction, ExtraWork: m.ExtraWork}
					mo.P50Ratio, mo.P99Ratio, mo.P999Ratio = m.P50/base.P50, m.P99/base.P99, m.P999/base.P999
					for _, p := range rep.Predictions {
						o := p.Rows[2*ci+bi]
						t.Logf("%s %s budget=%v %s: hedged %.3f/%.3f p50 %.2f/%.2f p99 %.2f/%.2f p99.9 %.2f/%.2f work %+.3f/%+.3f (predicted/measured)",
							wc.w, ch.Label, budget, p.Kind, o.HedgeRate, mo.HedgeRate, o.P50Ratio, mo.P50Ratio, o.P99Ratio, mo.P99Ratio, o.P999Ratio, mo.P999Ratio, o.ExtraWork, mo.ExtraWork)
						if c, ok := wc.checks[p.Kind]; ok {
							c(t, fmt.Sprintf("%s %s budget=%v %s", wc.w, ch.Label, budget, p.Kind), o, mo)
						}
					}
					if wc.w == sim.BigJobs && ch.Percentile == 90 {
						ind := rep.Predictions[0].Rows[2*ci+bi]
						if !(ind.P99Ratio < 0.5*mo.P99Ratio) {
							t.Errorf("bigjobs p90: the independent estimate's p99 ratio %.2f should be far below the measured %.2f (its assumption fails here)", ind.P99Ratio, mo.P99Ratio)
						}
					}
				}
			}
		})
	}
}

// measureWorld runs the simulator's world (its own random arrivals and
// sizes) unhedged (cfg nil) or with the Default strategy running cfg.
func measureWorld(t *testing.T, w sim.World, load float64, cfg *hedge.Config) sim.RunResult {
	t.Helper()
	c := sim.DefaultConfig()
	c.World, c.Load, c.Seed = w, load, 5
	c.Requests, c.Warmup = 240_000, 30_000
	if cfg != nil {
		c.Strategy, c.Hedge = sim.Default, cfg
	}
	res, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
