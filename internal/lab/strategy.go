package lab

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tailcut/hedge"
	"github.com/tailcut/hedge/internal/sim"

	"github.com/tailcut/hedge/internal/decide"
)

// A choice is one of the explorer's strategy choices: how the query names
// it, which of the simulator's strategies runs it, and how the page
// describes it.
type choice struct {
	// name is the API value (strategy=name). "tied" stands for tied=true,
	// which replaces the strategy. calib, when set, is the calibration
	// (calib=) the row is for: a calibrated strategy has one row for each.
	name, calib string
	// strategy is the simulator's strategy: none, tied, or a preset of a
	// hedge.Config (sim.Config.HedgeConfig). default runs the library's
	// zero hedge.Config.
	strategy sim.Strategy
	// calibrateAs, when set, is the calibrated strategy whose calibration
	// run (sim.CalibrationConfig) measures the delay, in place of
	// strategy's own: sim's only budget preset is calibrated on a quiet
	// day, so the budget at this load borrows the per-load calibration.
	calibrateAs sim.Strategy
	// set copies the choice's own parameters from p into c; nil for none.
	set func(c *sim.Config, p ExploreParams)
	// label names the hedged side in a sentence ("at the live p95").
	label func(p ExploreParams) string
	// note says where the delay comes from, given the configuration that
	// ran and the delay in force (its mean, for a live estimate); nil for
	// strategies without a delay.
	note func(p ExploreParams, c sim.Config, delay float64) string
}

// choices is the one table from the explorer's strategy choices to the
// simulator's strategies. The API's strategy values are its names, in
// order (exploreStrategies); nothing else in the lab translates them.
var choices = []choice{
	{name: "none", strategy: sim.None, label: constLabel("no hedging")},
	{name: "fixed", strategy: sim.HedgeFixed,
		set:   func(c *sim.Config, p ExploreParams) { c.Delay = p.Delay },
		label: func(p ExploreParams) string { return "after a fixed " + num(p.Delay) },
		note: func(p ExploreParams, _ sim.Config, _ float64) string {
			return fmt.Sprintf("a fixed delay of %s mean service times", num(p.Delay))
		}},
	{name: "percentile", calib: "quiet", strategy: sim.HedgeP95Quiet, label: percentileLabel, note: percentileNote},
	{name: "percentile", calib: "load", strategy: sim.HedgeP95PerLoad, label: percentileLabel, note: percentileNote},
	{name: "live", strategy: sim.HedgeP95Live,
		set:   func(c *sim.Config, p ExploreParams) { c.LiveP = p.LiveP },
		label: func(p ExploreParams) string { return fmt.Sprintf("at the live p%g", p.LiveP) },
		note: func(p ExploreParams, c sim.Config, delay float64) string {
			what := "latencies"
			if p.Width > 1 {
				what = "leaf latencies"
			}
			return fmt.Sprintf("the live p%g of the last %d %s the client saw; %s on average", p.LiveP, c.LiveWindow, what, num(delay))
		}},
	{name: "budget", calib: "quiet", strategy: sim.HedgeQuietBudget, set: setBudget, label: budgetLabel, note: budgetNote},
	{name: "budget", calib: "load", strategy: sim.HedgeQuietBudget, calibrateAs: sim.HedgeP95PerLoad,
		set: setBudget, label: budgetLabel, note: budgetNote},
	{name: "default", strategy: sim.Default,
		label: constLabel("the library default (" + libraryDefault + ")"),
		note: func(_ ExploreParams, _ sim.Config, delay float64) string {
			return "the library's default: " + libraryDefault + "; delay " + num(delay) + " on average"
		}},
	{name: "tied", strategy: sim.Tied, label: constLabel("tied requests")},
	{name: "tied-spare", strategy: sim.TiedSpare, label: constLabel("tied requests in the spare form")},
}

// libraryDefault describes the zero hedge.Config, read from the library
// so that the lab follows its default.
var libraryDefault = func() string {
	p, err := decide.FromConfig(hedge.Config{})
	if err != nil {
		panic(err) // the zero Config is valid
	}
	return p.String()
}()

// exploreStrategies are the API's strategy values: the names of choices,
// tied and tied-spare excepted (tied=true selects them, with help=idle-only
// for the spare form).
var exploreStrategies = func() []string {
	var names []string
	for _, ch := range choices {
		if ch.name != "tied" && ch.name != "tied-spare" && !slices.Contains(names, ch.name) {
			names = append(names, ch.name)
		}
	}
	return names
}()

// choice returns the row of choices that p selects. parseExplore accepts
// only strategies and calibrations that have one.
func (p ExploreParams) choice() choice {
	name := p.Strategy
	switch {
	case p.Tied && p.Help == "idle-only":
		name = "tied-spare" // the second copy runs only on an idle server
	case p.Tied:
		name = "tied"
	}
	for _, ch := range choices {
		if ch.name == name && (ch.calib == "" || ch.calib == p.Calibration) {
			return ch
		}
	}
	panic(fmt.Sprintf("lab: no strategy choice for strategy=%q calib=%q tied=%v", p.Strategy, p.Calibration, p.Tied))
}

// calibrated reports whether the choice's delay is measured by a
// calibration run.
func (ch choice) calibrated() bool { return ch.strategy.NeedsCalibration() }

// calibration returns the strategy whose calibration run gives the delay.
func (ch choice) calibration() sim.Strategy {
	if ch.calibrateAs != sim.None {
		return ch.calibrateAs
	}
	return ch.strategy
}

// config returns the simulation of p's hedged side and its choice. A
// calibrated choice's Delay is still 0: see Server.calibrate.
func (p ExploreParams) config() (sim.Config, choice) {
	ch := p.choice()
	c := p.baseConfig()
	c.Strategy = ch.strategy
	if ch.strategy != sim.None {
		c.NoCancel = !p.Cancel
		c.IdleOnlyCopies = p.Help == "idle-only" && !p.Tied // tied: the choice is the spare form
		c.LowPriorityCopies = p.Help == "low-priority"
		// The call's budget, cap and trigger are for delayed copies;
		// without canaries it changes nothing for tied requests.
		if p.FanCall && p.Width > 1 && ch.strategy.Hedges() {
			c.FanCall = &hedge.FanOut{} // the library's defaults
		}
	}
	if ch.set != nil {
		ch.set(&c, p)
	}
	return c, ch
}

// calibrationRuns is how many unhedged runs measure a calibrated delay:
// one, as in "hedge sim" and "hedge study".
const calibrationRuns = 1

// calibrate returns the delay of p's calibrated choice ch, in time units:
// the chosen percentile of unhedged latency (of a leaf's, with a fan-out)
// in the run that
// sim.CalibrationConfig prescribes for ch's calibration strategy (at the
// point's load or on a quiet day, with the seed sim derives from p's by
// its one rule). The p95 is exactly what sim.Calibrate returns: the hedged
// unit's p95 at the library's nanosecond resolution. So "hedge sim", "hedge
// study" and the lab hedge after the same delay at the same point and
// seed. The run is cached like any point, so the percentile, the budget
// and the cancellation can change without rerunning it.
func (s *Server) calibrate(ctx context.Context, p ExploreParams, ch choice, workers int, simulated *int) (float64, error) {
	c := p.baseConfig()
	c.Strategy = ch.calibration()
	cal, err := s.point(ctx, sim.CalibrationConfig(c), calibrationRuns, workers, simulated)
	if err != nil {
		return 0, err
	}
	// The hedged unit is the leaf with a fan-out (UnitP95 is then a
	// leaf's p95): its delay is a percentile of leaf latency.
	pcts := map[string]sim.Estimate{"50": cal.P50, "95": cal.UnitP95, "99": cal.P99, "99.9": cal.P999}
	if p.Width > 1 {
		pcts = map[string]sim.Estimate{"50": cal.LeafP50, "95": cal.UnitP95, "99": cal.LeafP99, "99.9": cal.LeafP999}
	}
	x := pcts[p.Percentile].Value
	return sim.Units(hedge.Fixed(time.Duration(math.Round(x * float64(sim.Unit))))), nil
}

// constLabel returns a label that does not depend on the parameters.
func constLabel(s string) func(ExploreParams) string { return func(ExploreParams) string { return s } }

// calibratedOn names where a calibrated delay was measured.
func calibratedOn(p ExploreParams) string {
	if p.Calibration == "quiet" {
		return fmt.Sprintf("a quiet day (load %g)", sim.QuietLoad)
	}
	return "this load"
}

func percentileLabel(p ExploreParams) string {
	day := "this load"
	if p.Calibration == "quiet" {
		day = "a quiet day"
	}
	return fmt.Sprintf("at the p%s of %s", p.Percentile, day)
}

func percentileNote(p ExploreParams, _ sim.Config, _ float64) string {
	what := "latency"
	if p.Width > 1 {
		what = "leaf latency"
	}
	return fmt.Sprintf("the p%s of unhedged %s measured on %s", p.Percentile, what, calibratedOn(p))
}

func setBudget(c *sim.Config, p ExploreParams) { c.Budget = p.Budget / 100 }

func budgetLabel(p ExploreParams) string {
	return fmt.Sprintf("%s, budget %g%%", percentileLabel(p), p.Budget)
}

func budgetNote(p ExploreParams, c sim.Config, delay float64) string {
	return percentileNote(p, c, delay) + fmt.Sprintf(", with a budget of %g hedges per 100 requests", p.Budget)
}
