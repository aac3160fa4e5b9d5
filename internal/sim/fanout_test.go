package sim

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
)

var fanoutGrid = flag.Bool("fanout-grid", false, "run TestDefaultFanOutGrid: the default against none for fan-out requests over every world (a few minutes)")

// fanoutRatios runs the default and none for fan-out requests of width w
// in scenario at load (which counts leaves), and returns the default's
// request-level p50, p99 and p99.9 over none's, paired by run, and the
// share of leaves hedged.
func fanoutRatios(t *testing.T, scenario string, load float64, w, requests, runs int) (map[string]Estimate, float64) {
	t.Helper()
	return clientRatios(t, scenario, load, 1, w, requests, runs)
}

// clientRatios is fanoutRatios with the servers' traffic split evenly
// among clients clients, each with a Hedger of its own.
func clientRatios(t *testing.T, scenario string, load float64, clients, w, requests, runs int) (map[string]Estimate, float64) {
	t.Helper()
	c := scenarioConfig(t, scenario)
	c.Load, c.Fanout, c.Requests, c.Warmup, c.Clients = load, w, requests, requests/10, clients
	c.Seed = DeriveSeed(41, fmt.Sprint(scenario, load, w))
	n, d := c, c
	n.Strategy, d.Strategy = None, Default
	r, sd := pairedRatios(t, n, d, runs)
	return r, sd.HedgedFraction.Value
}

// scenarioConfig returns DefaultConfig with the default scenario name
// applied.
func scenarioConfig(t *testing.T, name string) Config {
	t.Helper()
	c := DefaultConfig()
	for _, sc := range DefaultScenarios {
		if sc.Name == name {
			sc.Apply(&c)
			return c
		}
	}
	t.Fatalf("no scenario %q", name)
	return c
}

// pairedRatios runs n and d, runs each, and returns d's p50, p99 and
// p99.9 over n's, paired by run (run i of each shares its seed), and d's
// summary.
func pairedRatios(t *testing.T, n, d Config, runs int) (map[string]Estimate, Summary) {
	t.Helper()
	sn, sd := runPoint(t, n, runs), runPoint(t, d, runs)
	col := func(s Summary, f func(*RunResult) float64) []float64 {
		xs := make([]float64, len(s.Runs))
		for i := range s.Runs {
			xs[i] = f(&s.Runs[i])
		}
		return xs
	}
	return map[string]Estimate{
		"p50":   Ratio(col(sd, func(r *RunResult) float64 { return r.P50 }), col(sn, func(r *RunResult) float64 { return r.P50 })),
		"p99":   Ratio(col(sd, func(r *RunResult) float64 { return r.P99 }), col(sn, func(r *RunResult) float64 { return r.P99 })),
		"p99.9": Ratio(col(sd, func(r *RunResult) float64 { return r.P999 }), col(sn, func(r *RunResult) float64 { return r.P999 })),
	}, sd
}

// TestDefaultFanOutNeverWorse runs the library's zero hedge.Config against
// no hedging for requests that fan out to 40 leaves over the ten servers
// and wait for all of them, at the points of the fan-out grid
// (TestDefaultFanOutGrid) nearest to harm, and fails if the request's
// p50, p99 or p99.9 is worse than none's by more than 5% or two standard
// errors of the paired ratio. It also requires the gain in the stalls
// world at load 0.3: a request p99 at most 0.6 of none's, which a default
// that read its own leaves as load (and so hedged none) would not reach.
func TestDefaultFanOutNeverWorse(t *testing.T) {
	requests, runs := 20_000, 4
	worst := []struct {
		scenario string
		load     float64
	}{{"bigjobs", 0.8}, {"mixed", 0.8}, {"stalls", 0.6}, {"noise", 0.8}}
	if raceEnabled {
		requests, runs = 5_000, 3
		worst = worst[:1]
	}
	for _, p := range worst {
		r, h := fanoutRatios(t, p.scenario, p.load, 40, requests, runs)
		for _, q := range []string{"p50", "p99", "p99.9"} {
			e := r[q]
			if math.IsNaN(e.Value) || e.Value > 1+max(0.05, 2*e.SE) {
				t.Errorf("%s at load %g, 40 leaves: default's request %s is %.3f ± %.3f of none's: worse than not hedging", p.scenario, p.load, q, e.Value, e.SE)
				continue
			}
			t.Logf("%s at load %g, 40 leaves: %s ratio %.3f ± %.3f (%.2f%% of leaves hedged)", p.scenario, p.load, q, e.Value, e.SE, 100*h)
		}
	}
	r, h := fanoutRatios(t, "stalls", 0.3, 40, requests, runs)
	if e := r["p99"]; math.IsNaN(e.Value) || e.Value-2*e.SE > 0.6 {
		t.Errorf("stalls at load 0.3, 40 leaves: default's request p99 is %.3f ± %.3f of none's (%.2f%% of leaves hedged), want at most 0.6", e.Value, e.SE, 100*h)
	} else {
		t.Logf("stalls at load 0.3, 40 leaves: p99 ratio %.3f ± %.3f (%.2f%% of leaves hedged; gain kept)", e.Value, e.SE, 100*h)
	}
}

// TestDefaultFanOutGrid measures the zero Config against none for fan-out
// requests, the table of docs/default.md ("Fan-out"):
//
//	go test ./internal/sim -run TestDefaultFanOutGrid -fanout-grid -v
//
// For widths 10 and 40 (all leaves awaited), every world, loads 0.1 to
// 0.9 (counting leaves), 20,000 requests per run and 3 runs per point, it
// prints each ratio of request-level p50, p99 and p99.9 and the share of
// leaves hedged, and the worst ratio, which it then measures again with 8
// runs of 60,000 requests. It asserts nothing.
func TestDefaultFanOutGrid(t *testing.T) {
	if !*fanoutGrid {
		t.Skip("a measurement, not a test: run with -fanout-grid")
	}
	worlds := []string{"noise", "stalls", "bigjobs", "mixed", "lognormal σ=1", "correlated", "ps-stalls", "ps-bigjobs"}
	loads := []float64{0.1, 0.3, 0.5, 0.7, 0.8, 0.9}
	for _, w := range []int{10, 40} {
		worst, where := 0.0, ""
		var worstWorld, worstQ string
		var worstLoad float64
		t.Logf("| width %d | load | p50 | p99 | p99.9 | leaves hedged |", w)
		for _, world := range worlds {
			for _, l := range loads {
				r, h := fanoutRatios(t, world, l, w, 20_000, 3)
				t.Logf("| %s | %g | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.2f%% |", world, l,
					r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*h)
				for _, q := range []string{"p50", "p99", "p99.9"} {
					if r[q].Value > worst {
						worst, where = r[q].Value, fmt.Sprintf("%s %s at %g, ± %.3f", world, q, l, r[q].SE)
						worstWorld, worstQ, worstLoad = world, q, l
					}
				}
			}
		}
		t.Logf("width %d: worst ratio %.3f (%s)", w, worst, where)
		r, _ := fanoutRatios(t, worstWorld, worstLoad, w, 60_000, 8)
		t.Logf("width %d: the worst point again, 8 runs of 60,000 requests: %s %.3f ± %.3f", w, worstQ, r[worstQ].Value, r[worstQ].SE)
	}
}

var clientsGrid = flag.Bool("clients-grid", false, "run TestDefaultClientsGrid: the default against none with many clients and fan-outs (a few minutes)")

// TestDefaultClientsGrid measures the zero Config against none when C
// clients share the servers, each with its own Hedger and an even share
// of the traffic, for plain requests and fan-outs of 40 leaves, the grid
// of docs/default.md ("Many clients"):
//
//	go test ./internal/sim -run TestDefaultClientsGrid -v -args -clients-grid
//
// Nine worlds at loads 0.1 to 0.95, four runs per point of 200,000
// requests (20,000 fan-outs of 40 leaves); none routes as the default
// does (two choices by each client's own view). It prints every point
// worse than none by more than 5% and two standard errors, the worst
// ratio per C and width (by its value less two standard errors), and the
// gains: stalls p99.9, noise and big-jobs p99 at loads 0.1 to 0.7. It
// asserts nothing (TestDefaultNeverWorse reruns its worst points).
func TestDefaultClientsGrid(t *testing.T) {
	if !*clientsGrid {
		t.Skip("a measurement, not a test: run with -clients-grid")
	}
	worlds := []string{"noise", "stalls", "bigjobs", "mixed", "lognormal σ=1", "lognormal σ=2", "correlated", "ps-stalls", "ps-bigjobs"}
	loads := []float64{0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95}
	for _, w := range []int{1, 40} {
		for _, c := range []int{1, 10, 100} {
			requests := 200_000
			if w > 1 {
				requests = 20_000
			}
			worst, where := 0.0, ""
			var gains []string
			for _, world := range worlds {
				for _, l := range loads {
					r, h := clientRatios(t, world, l, c, w, requests, 4)
					miss := ""
					for _, q := range []string{"p50", "p99", "p99.9"} {
						e := r[q]
						if e.Value > 1+max(0.05, 2*e.SE) {
							miss += " " + q
						}
						if e.Value-2*e.SE > worst {
							worst, where = e.Value-2*e.SE, fmt.Sprintf("%s %s at %g: %.3f ± %.3f", world, q, l, e.Value, e.SE)
						}
					}
					if miss != "" {
						t.Logf("C = %d, width %d, %s at %g, worse at%s: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f, hedged %.2f%%", c, w, world, l, miss,
							r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*h)
					}
					if l <= 0.7 {
						switch world {
						case "stalls":
							gains = append(gains, fmt.Sprintf("stalls p99.9 %.2f", r["p99.9"].Value))
						case "noise", "bigjobs":
							gains = append(gains, fmt.Sprintf("%s p99 %.2f", world, r["p99"].Value))
						}
					}
				}
			}
			t.Logf("C = %d, width %d: worst ratio less two standard errors %.3f (%s); gains at 0.1 to 0.7: %s", c, w, worst, where, strings.Join(gains, ", "))
		}
	}
}

// TestDefaultClientsBudget measures whether a smaller budget makes the
// default safe with ten clients (docs/default.md, "Many clients"):
//
//	go test ./internal/sim -run TestDefaultClientsBudget -v -args -clients-grid
//
// the zero Config with its own budgets (10% of each client's requests),
// and with one budget of 3% or 1% of all requests (bursts of 10) that
// every client spends from, at the worst points of the clients grid and two gains, three runs
// of 100,000 requests. The runs of a point, which may run at once, share
// the one Budget, so its rows move a little from one invocation to the
// next. It asserts nothing.
func TestDefaultClientsBudget(t *testing.T) {
	if !*clientsGrid {
		t.Skip("a measurement, not a test: run with -clients-grid")
	}
	for _, ratio := range []float64{0.1, 0.03, 0.01} {
		for _, p := range []struct {
			world   string
			load    float64
			clients int
		}{{"bigjobs", 0.8, 10}, {"bigjobs", 0.5, 10}, {"mixed", 0.7, 100}, {"stalls", 0.5, 10}, {"stalls", 0.3, 1}, {"noise", 0.3, 1}} {
			c := scenarioConfig(t, p.world)
			c.Load, c.Requests, c.Warmup, c.Clients = p.load, 100_000, 10_000, p.clients
			c.Seed = DeriveSeed(41, fmt.Sprint(p.world, p.load))
			n, d := c, c
			n.Strategy, d.Strategy = None, Default
			d.Hedge = &hedge.Config{}
			if ratio != 0.1 {
				// One Budget, which every client's Policy spends from:
				// at most that share of all requests is hedged.
				b, err := hedge.NewBudget(ratio, 10)
				if err != nil {
					t.Fatal(err)
				}
				d.Hedge.Budget = b
			}
			r, sd := pairedRatios(t, n, d, 3)
			r50, r99, r999 := r["p50"], r["p99"], r["p99.9"]
			t.Logf("budget %.2f, %s at %g, %d clients: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f, hedged %.2f%%", ratio, p.world, p.load, p.clients,
				r50.Value, r50.SE, r99.Value, r99.SE, r999.Value, r999.SE, 100*sd.Runs[0].HedgedFraction)
		}
	}
}

// TestFanOutLeafMeasures checks the sub-request measures of a fan-out run:
// unhedged, each request places exactly Fanout copies, and a request that
// waits for all its leaves is no faster than its leaves; with one leaf
// none of them is reported.
func TestFanOutLeafMeasures(t *testing.T) {
	c := DefaultConfig()
	c.World, c.Load, c.Fanout, c.Requests, c.Warmup = Stalls, 0.3, 10, 20_000, 2_000
	var s Simulator
	r, err := s.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Copies != 10 {
		t.Errorf("unhedged, copies per request = %v, want exactly 10", r.Copies)
	}
	if !(r.LeafP50 > 0 && r.LeafP50 <= r.LeafP99 && r.LeafP99 <= r.LeafP999) {
		t.Errorf("leaf percentiles out of order: p50 %v, p99 %v, p99.9 %v", r.LeafP50, r.LeafP99, r.LeafP999)
	}
	if r.P50 < r.LeafP50 || r.P99 < r.LeafP99 {
		t.Errorf("a request waiting for all 10 leaves is faster than its leaves: request p50 %v p99 %v, leaf p50 %v p99 %v", r.P50, r.P99, r.LeafP50, r.LeafP99)
	}
	c.Strategy = Default
	h, err := s.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := 10 * (1 + h.HedgedFraction); math.Abs(h.Copies-want) > 1e-9 {
		t.Errorf("default, copies per request = %v, want 10 x (1 + hedged fraction %v) = %v", h.Copies, h.HedgedFraction, want)
	}
	c.Fanout = 1
	o, err := s.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if o.Copies != 0 || o.LeafP99 != 0 {
		t.Errorf("without fan-out, leaf measures reported: copies %v, leaf p99 %v", o.Copies, o.LeafP99)
	}
}
