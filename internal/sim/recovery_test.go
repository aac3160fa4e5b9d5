package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tailcut/hedge"
)

// recoveryCase is one line of the recovery table.
type recoveryCase struct {
	name  string
	apply func(*Config)
}

var recoveryCases = []recoveryCase{
	{"none", func(c *Config) { c.Strategy = None }},
	{"default", func(c *Config) { c.Strategy = Default }},
	{"plain live p95, 10% budget", func(c *Config) {
		c.Strategy = Default
		c.Hedge = &hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1}
	}},
	{"live p95, no budget", func(c *Config) {
		c.Strategy = Default
		c.Hedge = &hedge.Config{MaxReplicaLoad: hedge.AnyReplicaLoad, PayoffWinRate: -1, NoBudget: true}
	}},
}

// recoveryConfig is the scenario: ten servers, two-choice routing, a run
// of 20,000 time units (the mean service time is one unit) in which every
// server is three times slower from 10,000 to 11,000. At load 0.5 and
// above the slowed servers are overloaded and the queues grow; after the
// slowdown they drain, and the question is whether the copies that a
// hedging client adds slow the draining, or keep the servers overloaded
// for good (a metastable collapse).
func recoveryConfig(load float64, disc Discipline, seed uint64) Config {
	c := DefaultConfig()
	c.World, c.Discipline, c.Load, c.Seed = Correlated, disc, load, seed
	c.SlowFactor, c.SlowAt, c.SlowFor = 3, 10_000, 1_000
	rate := load * float64(c.Servers)
	c.Requests = int(20_000 * rate)
	c.Warmup = int(2_000 * rate)
	return c
}

// TestRecoveryAfterGlobalSlowdown runs the library default, no hedging and
// the plain live-p95 policies through a global 3x slowdown and checks that
// the default sends no more copies than its budget allows while the
// servers are slow, and that its latency comes back as soon as not
// hedging's does: no metastable collapse. With -v it prints the table
// (docs/default.md has it).
func TestRecoveryAfterGlobalSlowdown(t *testing.T) {
	loads := []float64{0.3, 0.5, 0.7}
	discs := []Discipline{FCFS, PS}
	// Twelve seeds: a recovery time moves by a window or more from one
	// seed to the next under processor sharing, which three do not
	// average out.
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if raceEnabled {
		loads, discs, seeds = []float64{0.5}, []Discipline{FCFS}, seeds[:2]
	}
	var (
		sim Simulator
		tab strings.Builder
	)
	fmt.Fprintf(&tab, "| servers | load | policy | baseline | peak | recovered after | hedged before | hedged during | peak window |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, disc := range discs {
		for _, load := range loads {
			var noneAfter float64
			for _, rc := range recoveryCases {
				var sum Recovery
				recovered := true
				for _, seed := range seeds {
					c := recoveryConfig(load, disc, seed)
					rc.apply(&c)
					r, err := sim.MeasureRecovery(c, DefaultRecovery)
					if err != nil {
						t.Fatalf("%s at load %v: %v", rc.name, load, err)
					}
					recovered = recovered && r.Recovered
					sum.Baseline += r.Baseline / float64(len(seeds))
					sum.Peak += r.Peak / float64(len(seeds))
					sum.RecoveredAfter += r.RecoveredAfter / float64(len(seeds))
					sum.HedgeShareBefore += r.HedgeShareBefore / float64(len(seeds))
					sum.HedgeShareDuring += r.HedgeShareDuring / float64(len(seeds))
					sum.HedgeSharePeakWindow = math.Max(sum.HedgeSharePeakWindow, r.HedgeSharePeakWindow)
					if rc.name == "default" {
						// The budget: 10% of requests and a burst of 10
						// tokens, over the slowdown and the recovery.
						if r.HedgeShareDuring > 0.1+0.01 {
							t.Errorf("default, %v servers, load %v, seed %d: %.1f%% of requests hedged during the slowdown and recovery, above the 10%% budget", disc, load, seed, 100*r.HedgeShareDuring)
						}
					}
				}
				after := "never"
				if recovered {
					after = fmt.Sprintf("%.0f", sum.RecoveredAfter)
				}
				fmt.Fprintf(&tab, "| %v | %.1f | %s | %.2f | %.1f | %s | %.1f%% | %.1f%% | %.1f%% |\n",
					disc, load, rc.name, sum.Baseline, sum.Peak, after,
					100*sum.HedgeShareBefore, 100*sum.HedgeShareDuring, 100*sum.HedgeSharePeakWindow)
				switch rc.name {
				case "none":
					if !recovered {
						t.Fatalf("none, %v servers, load %v: latency never came back; the scenario is wrong", disc, load)
					}
					noneAfter = sum.RecoveredAfter
				case "default":
					// As soon as none's, give or take two windows.
					if !recovered || sum.RecoveredAfter > noneAfter+2*DefaultRecovery.Window {
						t.Errorf("default, %v servers, load %v: recovered after %s time units, none after %.0f: hedging slows the recovery", disc, load, after, noneAfter)
					}
				}
			}
		}
	}
	t.Logf("recovery after every server ran 3x slower for 1,000 units (means of %d seeds; times in units after the slowdown ended):\n%s", len(seeds), tab.String())
}

func TestMeasureRecoveryRejectsBadScenarios(t *testing.T) {
	var s Simulator
	c := DefaultConfig()
	c.Requests, c.Warmup = 10_000, 1_000
	if _, err := s.MeasureRecovery(c, DefaultRecovery); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "scheduled slowdown") {
		t.Errorf("noise world: err = %v, want ErrInvalid naming the scheduled slowdown", err)
	}
	c.World, c.SlowAt, c.SlowFor = Correlated, 10, 100
	c.Warmup = 9_000
	if _, err := s.MeasureRecovery(c, DefaultRecovery); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "before the slowdown") {
		t.Errorf("slowdown before the warm-up ends: err = %v, want ErrInvalid saying no request came before it", err)
	}
	c.SlowFor = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "scheduled slowdown") {
		t.Errorf("negative SlowFor: Validate = %v, want an error naming the scheduled slowdown", err)
	}
}

// TestScheduledSlowdownSlowsEveryServer checks the scheduled slowdown
// against its closed form: with no queueing to speak of (load 0.05), a
// request that arrives and is served inside the slowdown takes three
// times as long on average.
func TestScheduledSlowdownSlowsEveryServer(t *testing.T) {
	c := DefaultConfig()
	c.World, c.Load, c.Seed = Correlated, 0.05, 7
	c.SlowFactor, c.SlowAt, c.SlowFor = 3, 20_000, 20_000
	c.Requests, c.Warmup = 30_000, 0 // 0.5 arrivals per unit: 60,000 units
	var s Simulator
	var in, out struct {
		n   int
		sum float64
	}
	s.Done = func(d Completion) {
		switch {
		case d.Arrival > c.SlowAt+100 && d.Arrival+d.Latency < c.SlowAt+c.SlowFor:
			in.n++
			in.sum += d.Latency
		case d.Arrival > c.SlowAt+c.SlowFor+100 || d.Arrival+d.Latency < c.SlowAt:
			out.n++
			out.sum += d.Latency
		}
	}
	if _, err := s.Run(c); err != nil {
		t.Fatal(err)
	}
	mIn, mOut := in.sum/float64(in.n), out.sum/float64(out.n)
	// Light load: the mean is the mean service time (3 inside, 1
	// outside) plus a little queueing, less than random routing's M/M/1
	// at 15% and 5% (3/(1-0.15), 1/(1-0.05)); five standard errors of an
	// Exp mean over these counts either side.
	check := func(what string, m float64, n int, lo, hi float64) {
		se := lo / math.Sqrt(float64(n))
		if m < lo-5*se || m > hi+5*se {
			t.Errorf("mean latency %s the slowdown %.3f over %d requests, want %.3f to %.3f", what, m, n, lo, hi)
		}
	}
	check("inside", mIn, in.n, 3, 3/(1-0.15))
	check("outside", mOut, out.n, 1, 1/(1-0.05))
}
