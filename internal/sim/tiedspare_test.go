package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestTiedSpareNeverWorse runs tied requests in their spare form against
// none in the FCFS worlds of DefaultScenarios, at low and high load and
// with one and ten clients, and fails if a p50, p99 or p99.9 is worse than
// none's by more than 2% or two standard errors of the paired ratio. One
// copy of each request runs, moved from a queue to an idle server, so
// the form must never lose; it must also move some requests at high load
// (it would not, if the spare never found an idle server or never ran),
// and cut the median there.
func TestTiedSpareNeverWorse(t *testing.T) {
	requests, runs := 100_000, 3
	loads := []float64{0.3, 0.9}
	if raceEnabled {
		requests, loads = 20_000, []float64{0.9}
	}
	for _, sc := range DefaultScenarios {
		if sc.Disc == PS {
			continue
		}
		for _, clients := range []int{1, 10} {
			for _, load := range loads {
				c := scenarioConfig(t, sc.Name)
				c.Load, c.Requests, c.Warmup, c.Clients = load, requests, requests/10, clients
				c.Seed = DeriveSeed(43, fmt.Sprint(sc.Name, load, clients))
				n, s := c, c
				n.Strategy, s.Strategy = None, TiedSpare
				r, ss := pairedRatios(t, n, s, runs)
				for _, q := range []string{"p50", "p99", "p99.9"} {
					e := r[q]
					if math.IsNaN(e.Value) || e.Value > 1+max(0.02, 2*e.SE) {
						t.Errorf("%s, load %g, %d clients: tied-spare %s is %.3f ± %.3f of none's", sc.Name, load, clients, q, e.Value, e.SE)
					}
				}
				moved := ss.SpareMoved.Value
				if load >= 0.9 && (moved < 0.01 || r["p50"].Value > 0.98) {
					t.Errorf("%s, load %g, %d clients: %.2f%% of requests run by their spare, p50 ratio %.3f: want some moved and the median cut", sc.Name, load, clients, 100*moved, r["p50"].Value)
				}
				if ss.ExtraWork.Value != 0 || ss.MultiStarted.Value != 0 {
					t.Errorf("%s: extra work %v, both copies ran %v: want one copy run", sc.Name, ss.ExtraWork.Value, ss.MultiStarted.Value)
				}
				t.Logf("%-10s load %.1f C=%2d  p50 %.3f  p99 %.3f  p99.9 %.3f  moved %5.2f%%", sc.Name, load, clients, r["p50"].Value, r["p99"].Value, r["p99.9"].Value, 100*moved)
			}
		}
	}
}

func TestTiedSpareValidates(t *testing.T) {
	c := DefaultConfig()
	c.Strategy, c.Discipline = TiedSpare, PS
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "processor sharing") {
		t.Errorf("tied-spare with ps: %v", err)
	}
	c = DefaultConfig()
	c.Strategy, c.Routing = TiedSpare, Pool
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Errorf("tied-spare with pool routing: %v", err)
	}
	if s, err := ParseStrategy("tied-spare"); err != nil || s != TiedSpare {
		t.Errorf("ParseStrategy(tied-spare) = %v, %v", s, err)
	}
}
