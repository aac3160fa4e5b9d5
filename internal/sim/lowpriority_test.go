package sim

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tailcut/hedge"
)

func TestLowPriorityCopiesValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"ps", func(c *Config) { c.Discipline = PS }, "fcfs"},
		{"pool", func(c *Config) { c.Routing = Pool }, "queue per server"},
		{"tied", func(c *Config) { c.Strategy = Tied }, "tied"},
		{"both forms", func(c *Config) { c.IdleOnlyCopies = true }, "choose one"},
	} {
		c := DefaultConfig()
		c.Strategy = Default
		c.LowPriorityCopies = true
		tc.set(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrInvalid that names %q", tc.name, err, tc.want)
		}
	}
}

// TestLowPriorityCopiesNeverDelayAPrimary runs hedging with low-priority
// copies in worlds with queues, stalls and many clients, and checks at
// every start of a copy that no primary waits on its server: a copy runs
// only on capacity no primary wants, and a primary that arrives takes the
// server from it (Preempted counts those).
func TestLowPriorityCopiesNeverDelayAPrimary(t *testing.T) {
	var starts, violations atomic.Int64
	checkLowPriority = func(e *engine, s int32) {
		starts.Add(1)
		f := &e.qs[e.srv[s].q]
		for i := range f.n {
			ent := f.buf[(f.head+i)&(len(f.buf)-1)]
			r := &e.slots[ent.slot]
			if r.gen == ent.gen && r.state[ent.k] == cWaiting {
				violations.Add(1)
				return
			}
		}
	}
	defer func() { checkLowPriority = nil }()
	for _, sc := range []string{"bigjobs", "mixed", "stalls"} {
		for _, clients := range []int{1, 10} {
			c := scenarioConfig(t, sc)
			c.Load, c.Requests, c.Warmup, c.Clients = 0.8, 20_000, 2_000, clients
			c.Strategy, c.Hedge, c.LowPriorityCopies = Default, &hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}, true
			var s Simulator
			r, err := s.Run(c)
			if err != nil {
				t.Fatal(err)
			}
			if r.HedgedFraction == 0 || r.Preempted == 0 {
				t.Errorf("%s, %d clients: hedged %v, preempted %d: the check saw no contention", sc, clients, r.HedgedFraction, r.Preempted)
			}
		}
	}
	if starts.Load() == 0 || violations.Load() != 0 {
		t.Fatalf("%d copies started while a primary waited on their server, of %d copies started", violations.Load(), starts.Load())
	}
}

// TestLowPriorityCopiesKeepTheDefaultSafe is the reduced grid of the many
// clients' measurement (TestLowPriorityGrid) with servers that run copies
// at low priority: the zero Config against none with 10 and 100 clients
// at the points where, without that help, the default raises the median
// most (docs/default.md, "Many clients"). It fails if p50, p99 or p99.9
// is worse than none's by more than 5% or two standard errors of the
// paired ratio, and requires the stalls world's gain: p99.9 at most 0.3 of
// none's at load 0.3.
func TestLowPriorityCopiesKeepTheDefaultSafe(t *testing.T) {
	requests, runs := 100_000, 4
	for _, clients := range []int{10, 100} {
		for _, p := range []struct {
			scenario string
			load     float64
		}{{"bigjobs", 0.8}, {"bigjobs", 0.3}, {"mixed", 0.8}, {"stalls", 0.3}, {"correlated", 0.5}} {
			r, h := lowRatios(t, p.scenario, p.load, clients, requests, runs, &hedge.Config{})
			t.Logf("%s at %g, %d clients: p50 %.3f ± %.3f, p99 %.3f ± %.3f, p99.9 %.3f ± %.3f, hedged %.2f%%", p.scenario, p.load, clients,
				r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*h)
			for _, q := range []string{"p50", "p99", "p99.9"} {
				e := r[q]
				if e.Value > 1.05 && e.Value > 1+2*e.SE {
					t.Errorf("%s at %g, %d clients: %s %.3f ± %.3f of none's", p.scenario, p.load, clients, q, e.Value, e.SE)
				}
			}
			if p.scenario == "stalls" && r["p99.9"].Value > 0.3 {
				t.Errorf("stalls at %g, %d clients: p99.9 %.3f of none's, want at most 0.3", p.load, clients, r["p99.9"].Value)
			}
		}
	}
}

// lowRatios returns the paired ratios of hedging with h on servers that
// run copies at low priority to no hedging, and the share hedged.
func lowRatios(t *testing.T, scenario string, load float64, clients, requests, runs int, h *hedge.Config) (map[string]Estimate, float64) {
	t.Helper()
	c := scenarioConfig(t, scenario)
	c.Load, c.Requests, c.Warmup, c.Clients = load, requests, requests/10, clients
	c.Seed = DeriveSeed(43, fmt.Sprint(scenario, load, clients))
	n, d := c, c
	n.Strategy, d.Strategy = None, Default
	d.Hedge, d.LowPriorityCopies = h, true
	r, sd := pairedRatios(t, n, d, runs)
	return r, sd.HedgedFraction.Value
}

// TestLowPriorityGrid measures the zero Config against none with many
// clients and fan-outs on servers that run copies at low priority, the
// table of docs/default.md ("With the servers' help"):
//
//	go test ./internal/sim -run TestLowPriorityGrid -v -args -clients-grid
//
// Every FCFS world at loads 0.1 to 0.9, C in {1, 10, 100} and widths 1
// and 40, three runs of 100,000 requests (20,000 with fan-outs) per point.
// It prints each point's ratios and the worst per C and width, which it
// then measures again with 8 runs of 60,000 requests. It asserts nothing.
func TestLowPriorityGrid(t *testing.T) {
	if !*clientsGrid {
		t.Skip("a measurement, not a test: run with -clients-grid")
	}
	worlds := []string{"noise", "stalls", "bigjobs", "mixed", "lognormal σ=1", "correlated"}
	loads := []float64{0.1, 0.3, 0.5, 0.7, 0.8, 0.9}
	for _, w := range []int{1, 40} {
		for _, clients := range []int{1, 10, 100} {
			requests := 100_000
			if w > 1 {
				requests = 20_000
			}
			worst, where := 0.0, ""
			var worstWorld, worstQ string
			var worstLoad float64
			t.Logf("| C = %d, width %d | load | p50 | p99 | p99.9 | hedged |", clients, w)
			for _, world := range worlds {
				for _, l := range loads {
					c := scenarioConfig(t, world)
					c.Load, c.Fanout, c.Requests, c.Warmup, c.Clients = l, w, requests, requests/10, clients
					c.Seed = DeriveSeed(47, fmt.Sprint(world, l, w, clients))
					n, d := c, c
					n.Strategy, d.Strategy = None, Default
					d.Hedge, d.LowPriorityCopies = &hedge.Config{}, true
					r, sd := pairedRatios(t, n, d, 3)
					t.Logf("| %s | %g | %.3f ± %.3f | %.3f ± %.3f | %.3f ± %.3f | %.2f%% |", world, l,
						r["p50"].Value, r["p50"].SE, r["p99"].Value, r["p99"].SE, r["p99.9"].Value, r["p99.9"].SE, 100*sd.HedgedFraction.Value)
					for _, q := range []string{"p50", "p99", "p99.9"} {
						if r[q].Value > worst {
							worst, where = r[q].Value, fmt.Sprintf("%s %s at %g, ± %.3f", world, q, l, r[q].SE)
							worstWorld, worstQ, worstLoad = world, q, l
						}
					}
				}
			}
			t.Logf("C = %d, width %d: worst ratio %.3f (%s)", clients, w, worst, where)
			// The worst point again, with more and longer runs.
			c := scenarioConfig(t, worstWorld)
			c.Load, c.Fanout, c.Requests, c.Warmup, c.Clients = worstLoad, w, 60_000, 6_000, clients
			c.Seed = DeriveSeed(53, fmt.Sprint("again", clients))
			n, d := c, c
			n.Strategy, d.Strategy = None, Default
			d.Hedge, d.LowPriorityCopies = &hedge.Config{}, true
			r, _ := pairedRatios(t, n, d, 8)
			t.Logf("C = %d, width %d: the worst point again, 8 runs of 60,000 requests: %s %.3f ± %.3f", clients, w, worstQ, r[worstQ].Value, r[worstQ].SE)
		}
	}
}

// TestIdleOnlyCopiesRefuseOnBusyServers checks the simpler form: copies
// go only to idle servers, the rest are refused and counted.
func TestIdleOnlyCopiesRefuseOnBusyServers(t *testing.T) {
	c := scenarioConfig(t, "stalls")
	c.Load, c.Requests, c.Warmup, c.Clients = 0.7, 20_000, 2_000, 10
	c.Strategy, c.Hedge, c.IdleOnlyCopies = Default, &hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}, true
	var s Simulator
	r, err := s.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.HedgedFraction == 0 || r.RefusedByServer == 0 || r.MultiStarted > r.HedgedFraction {
		t.Fatalf("hedged %v, refused by servers %d: want both", r.HedgedFraction, r.RefusedByServer)
	}
}

// TestServerHelpForms measures the two forms of the servers' help
// against each other and against none (docs/default.md, "With the
// servers' help"):
//
//	go test ./internal/sim -run TestServerHelpForms -v -args -clients-grid
//
// the zero Config with no help, with idle-only copies and with
// low-priority copies, at 1, 10 and 100 clients, three runs of 100,000
// requests per point; "sent" is the copies sent per request, refused ones
// included (each a message to a server and its answer). It asserts
// nothing.
func TestServerHelpForms(t *testing.T) {
	if !*clientsGrid {
		t.Skip("a measurement, not a test: run with -clients-grid")
	}
	points := []struct {
		world string
		load  float64
	}{{"bigjobs", 0.3}, {"bigjobs", 0.8}, {"mixed", 0.8}, {"stalls", 0.3}, {"stalls", 0.5}, {"stalls", 0.7}, {"noise", 0.5}}
	for _, clients := range []int{1, 10, 100} {
		for _, p := range points {
			line := fmt.Sprintf("| %d | %s | %g |", clients, p.world, p.load)
			for _, form := range []string{"none", "idle-only", "low-priority"} {
				c := scenarioConfig(t, p.world)
				c.Load, c.Requests, c.Warmup, c.Clients = p.load, 100_000, 10_000, clients
				c.Seed = DeriveSeed(59, fmt.Sprint(p.world, p.load, clients))
				n, d := c, c
				n.Strategy, d.Strategy, d.Hedge = None, Default, &hedge.Config{}
				d.IdleOnlyCopies, d.LowPriorityCopies = form == "idle-only", form == "low-priority"
				r, sd := pairedRatios(t, n, d, 3)
				r50, r999 := r["p50"], r["p99.9"]
				sent := 0.0
				for _, r := range sd.Runs {
					sent += (r.HedgedFraction + float64(r.RefusedByServer)/float64(r.Requests)) / float64(len(sd.Runs))
				}
				line += fmt.Sprintf(" %.3f / %.3f, %.1f%% |", r50.Value, r999.Value, 100*sent)
			}
			t.Log(line)
		}
	}
}
