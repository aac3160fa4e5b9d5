package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/tailcut/hedge"
)

// RunPoint runs c runs times, run i with seed RunSeed(c.Seed, i), on up to
// workers goroutines (GOMAXPROCS if workers < 1), and summarizes them. The
// result does not depend on workers. It stops early with ctx's error if ctx
// is cancelled, a run in progress included (Simulator.RunContext).
func RunPoint(ctx context.Context, c Config, runs, workers int) (Summary, error) {
	if runs < 1 {
		return Summary{}, fmt.Errorf("%w: runs = %d: use at least 1", ErrInvalid, runs)
	}
	if err := c.Validate(); err != nil {
		return Summary{}, err
	}
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, runs)
	res := make([]RunResult, runs)
	errs := make([]error, runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var s Simulator
			for i := range next {
				rc := c
				rc.Seed = RunSeed(c.Seed, i)
				res[i], errs[i] = s.RunContext(ctx, rc) // valid: checked above, so only ctx's error
			}
		})
	}
	var err error
feed:
	for i := range runs {
		// A select picks at random among ready cases: check first, so
		// that a cancelled context starts no more runs.
		if err = ctx.Err(); err != nil {
			break
		}
		select {
		case next <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, e := range errs {
		if err == nil {
			err = e // ctx's, the same for every run it stopped
		}
	}
	if err != nil {
		return Summary{}, err
	}
	return Summarize(c, res), nil
}

// Calibrate returns the delay a calibrated strategy uses for c, as the
// library's hedge.Fixed: the mean across runs of the p95 latency of the
// hedged unit, measured by runs unhedged runs of CalibrationConfig(c).
// Other strategies get Fixed(c.Delay) back. Every calibrated delay of the
// project (hedge sim, the lab, the study) comes from CalibrationConfig, so
// that one seed rule holds everywhere.
func Calibrate(ctx context.Context, c Config, runs, workers int) (hedge.Fixed, error) {
	if !c.Strategy.NeedsCalibration() {
		return hedge.Fixed(toDuration(c.Delay)), nil
	}
	s, err := RunPoint(ctx, CalibrationConfig(c), runs, workers)
	if err != nil {
		return 0, err
	}
	return hedge.Fixed(toDuration(s.UnitP95.Value)), nil
}

// Units converts a delay of the library to simulated time units, for
// Config.Delay.
func Units(d hedge.Fixed) float64 { return fromDuration(time.Duration(d)) }

// CalibrationConfig returns the unhedged configuration whose p95 is the
// delay of c's calibrated strategy: c at the strategy's calibration load
// (c.Load for hedge-p95-per-load, QuietLoad for the quiet-day
// strategies), with the seed DeriveSeed(c.Seed, its scenario and
// "|calibration"). c.Seed is the master seed of whatever runs c: the
// command's --seed, or the study's.
func CalibrationConfig(c Config) Config {
	cc := c
	cc.Load = c.Strategy.CalibrationLoad(c.Load)
	cc.Strategy = None
	cc.Delay = 0
	cc.Seed = DeriveSeed(c.Seed, scenarioKey(cc)+"|calibration")
	return cc
}
